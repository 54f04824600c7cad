// Engine::start_timeline / stop_timeline (hora::start_timeline, hvd.start_timeline) called at run
// time from threads other than the cycles' while the ranks keep submitting ops: each file is
// valid JSON once stop (or the next start) returns and holds the ops of its interval. Run under
// ThreadSanitizer (build-tsan, suite engine), this also checks that the hand-over to the
// engine's cycle_mu_ has no race.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <hora/async.h>
#include <hora/error.h>

#include "runtime/engine/engine.h"
#include "runtime/engine/op_state.h"
#include "test/read_file.h"
#include "test/runtime/engine/json_reader.h"
#include "test/runtime/engine/rank_harness.h"

using namespace hora;
using namespace hora::detail::engine;
using hora::test::fast_options;
using hora::test::RankHarness;
using hora::test::slurp;

namespace {

constexpr auto kWait = std::chrono::seconds(20);

std::string temp_path(const std::string& stem) {
  return hora::test::temp_path("hora_timeline_runtime_test", stem);
}

// Tensor name -> its complete events' names; throws (parse_json) if the file is not valid JSON.
std::map<std::string, std::vector<std::string>> activities(const std::string& path) {
  hora::test::JsonValue doc = hora::test::parse_json(slurp(path));
  std::map<int, std::string> rows;
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& e : doc.array) {
    const std::string& ph = e.find("ph")->string;
    const int pid = static_cast<int>(e.find("pid")->number);
    if (ph == "M" && e.find("name")->string == "process_name")
      rows[pid] = e.find("args")->find("name")->string;
    if (ph == "X") out[rows.at(pid)].push_back(e.find("name")->string);
  }
  return out;
}

// One allreduce named `name` on this rank, waited for; "" or its error.
std::string allreduce(Engine& engine, const std::string& name) {
  std::vector<float> v(16, 1.0f);
  try {
    synchronize(engine.submit(make_allreduce_op(name, v.data(), v.data(), v.size(),
                                                DataType::kFloat32, ReduceOp::kSum)),
                std::chrono::duration_cast<std::chrono::milliseconds>(kWait));
  } catch (const std::exception& e) {
    return e.what();
  }
  return v[0] == 2.0f ? "" : name + ": wrong sum";
}

}  // namespace

TEST_CASE("start_timeline/stop_timeline from another thread while ops run: each file is valid",
          "[engine][timeline]") {
  const int n = 2;
  constexpr int kFiles = 5;
  RankHarness h(n, fast_options());
  std::vector<std::string> problems(n);
  std::vector<std::string> paths;
  for (int f = 0; f < kFiles; ++f) paths.push_back(temp_path("t" + std::to_string(f) + ".json"));
  // Rank 0's body starts and stops a file per interval (the other ranks' calls do nothing),
  // each holding one op that both ranks submit and complete inside it.
  h.run(
      [&](RankHarness::Rank& me) {
        auto& bad = problems[static_cast<std::size_t>(me.rank)];
        if (me.rank == 0) {
          for (int f = 0; f < kFiles; ++f) {
            me.engine->start_timeline(paths[static_cast<std::size_t>(f)], f % 2 == 1);
            // An op whose whole life lies inside file f (both ranks submit it).
            me.barrier("inside " + std::to_string(f));
            bad += allreduce(*me.engine, "inside/" + std::to_string(f));
            me.barrier("inside done " + std::to_string(f));
            me.engine->stop_timeline();
          }
        } else {
          me.engine->start_timeline(temp_path("ignored.json"), true);  // not rank 0: nothing
          for (int f = 0; f < kFiles; ++f) {
            me.barrier("inside " + std::to_string(f));
            bad += allreduce(*me.engine, "inside/" + std::to_string(f));
            me.barrier("inside done " + std::to_string(f));
          }
          me.engine->stop_timeline();
        }
      },
      nullptr);
  // Then a thread per rank submits "busy" ops (the same names on both ranks) while this thread
  // starts and stops rank 0's timeline: the calls land between (and wait for) busy cycles.
  constexpr int kBusy = 200;
  std::vector<std::thread> busy;
  std::vector<std::string> busy_problems(n);
  for (int r = 0; r < n; ++r) {
    busy.emplace_back([&, r] {
      for (int i = 0; i < kBusy; ++i) {
        busy_problems[static_cast<std::size_t>(r)] +=
            allreduce(h.engine(r), "busy/" + std::to_string(i));
      }
    });
  }
  const std::string toggled = temp_path("toggled.json");
  for (int k = 0; k < 20; ++k) {
    h.engine(0).start_timeline(toggled + std::to_string(k % 2), k % 3 == 0);
    h.engine(0).start_timeline(toggled + std::to_string(k % 2), false);  // same path: kept
    h.engine(0).stop_timeline();
    h.engine(0).stop_timeline();  // without a timeline: nothing
  }
  for (auto& t : busy) t.join();
  h.shutdown_all();

  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    CHECK(problems[static_cast<std::size_t>(r)].empty());
    CHECK(busy_problems[static_cast<std::size_t>(r)].empty());
  }
  for (int f = 0; f < kFiles; ++f) {
    INFO("file " << f);
    const auto acts = activities(paths[static_cast<std::size_t>(f)]);
    const std::string mine = "inside/" + std::to_string(f);
    REQUIRE(acts.count(mine) == 1);
    CHECK(acts.at(mine) == std::vector<std::string>{"NEGOTIATE_ALLREDUCE", "QUEUE", "ALLREDUCE"});
    for (int g = 0; g < kFiles; ++g) {
      if (g != f) CHECK(acts.count("inside/" + std::to_string(g)) == 0);
    }
    std::remove(paths[static_cast<std::size_t>(f)].c_str());
  }
  for (int k = 0; k < 2; ++k) {
    CHECK_NOTHROW(activities(toggled + std::to_string(k)));  // closed, valid
    std::remove((toggled + std::to_string(k)).c_str());
  }
  CHECK(slurp(temp_path("ignored.json")).empty());  // rank 1 wrote nothing
}

TEST_CASE("start_timeline names the file it cannot create and the engine carries on",
          "[engine][timeline]") {
  RankHarness h(2, fast_options());
  const std::string bad = temp_path("no-such-dir") + "/t.json";
  std::string what;
  try {
    h.engine(0).start_timeline(bad, false);
  } catch (const Error& e) {
    what = e.what();
  }
  CHECK_NOTHROW(h.engine(1).start_timeline(bad, false));  // rank 1 writes nothing
  CHECK(what.find(bad) != std::string::npos);
  CHECK(what.find("rank 0") != std::string::npos);
  CHECK(what.find("hora::start_timeline") != std::string::npos);
  std::vector<std::string> problems(2);
  h.run([&](RankHarness::Rank& me) {
    problems[static_cast<std::size_t>(me.rank)] = allreduce(*me.engine, "after");
  });
  h.shutdown_all();
  CHECK(problems[0].empty());
  CHECK(problems[1].empty());
}

TEST_CASE("HORA_TIMELINE=DYNAMIC (Horovod's) opens no file at start", "[engine][timeline]") {
  const std::string dir = temp_path("dynamic");
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  char old_cwd[4096];
  REQUIRE(::getcwd(old_cwd, sizeof old_cwd) != nullptr);
  REQUIRE(::chdir(dir.c_str()) == 0);
  EngineOptions o = fast_options();
  o.timeline_path = "DYNAMIC";
  {
    RankHarness h(2, o);
    std::vector<std::string> problems(2);
    h.run([&](RankHarness::Rank& me) {
      problems[static_cast<std::size_t>(me.rank)] = allreduce(*me.engine, "dyn");
    });
    h.shutdown_all();
    CHECK(problems[0].empty());
  }
  const bool made = ::access((dir + "/DYNAMIC").c_str(), F_OK) == 0;
  REQUIRE(::chdir(old_cwd) == 0);
  std::remove((dir + "/DYNAMIC").c_str());
  ::rmdir(dir.c_str());
  CHECK_FALSE(made);
}
