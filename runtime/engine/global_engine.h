// How the public async functions (<hora/async.h>) reach the process's Engine.
//
// The runtime creates the Engine in hora::init() (after its transport exists), starts it and
// installs it here; hora::shutdown() uninstalls it before shutting it down:
//
//   engine_ = std::make_shared<engine::Engine>(*transport_, options);
//   engine_->start();
//   engine::install_engine(engine_);
//   ...
//   engine::install_engine(nullptr);
//   engine_->shutdown();
//
// Submitting threads hold a shared_ptr while they submit, so uninstalling never destroys an
// Engine under their feet; a submission that races with shutdown completes with the shutdown
// error instead.
#pragma once

#include <memory>

namespace hora::detail::engine {

class Engine;

void install_engine(std::shared_ptr<Engine> engine);
std::shared_ptr<Engine> installed_engine();

}  // namespace hora::detail::engine
