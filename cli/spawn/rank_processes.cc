#include "cli/spawn/rank_processes.h"

#include <fmt/format.h>

#include "cli/output/log.h"
#include "common/duration.h"

namespace hora::cli {

namespace asio = boost::asio;

RankProcesses::RankProcesses(asio::io_context& io, Output& output, ProcessGraces graces,
                             Hooks hooks)
    : io_(io),
      output_(output),
      graces_(graces),
      hooks_(std::move(hooks)),
      end_timer_(io),
      drain_timer_(io) {}

RankProcesses::~RankProcesses() = default;

const RankProcesses::Entry* RankProcesses::find(int id) const {
  const auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second;
}

RankProcesses::Entry& RankProcesses::at(int id) { return entries_.at(id); }

void RankProcesses::start(int id, std::unique_ptr<RankProcess> process, const GuardRequest& request,
                          int output_rank) {
  io_thread_.assert_held();
  Entry& e = entries_[id];
  e.process = std::move(process);
  e.output_rank = output_rank;
  RankProcess::Events events;
  // RankProcess's events run on the io thread (cli/spawn/rank_process.h).
  events.on_output = [this, id](Stream s, std::string_view data) {
    io_thread_.assert_held();
    on_output(id, s, data);
  };
  events.on_output_closed = [this, id](Stream s) {
    io_thread_.assert_held();
    on_output_closed(id, s);
  };
  events.on_exit = [this, id](const ExitStatus& st) {
    io_thread_.assert_held();
    on_exit(id, st);
  };
  e.open = {true, true};
  try {
    e.process->start(request, std::move(events));
  } catch (...) {
    e.open = {false, false};
    throw;
  }
  e.started = true;
}

void RankProcesses::set_output_rank(int id, int rank) {
  io_thread_.assert_held();
  const auto it = entries_.find(id);
  if (it != entries_.end()) it->second.output_rank = rank;
}

bool RankProcesses::started(int id) const {
  io_thread_.assert_held();
  const Entry* e = find(id);
  return e != nullptr && e->started;
}

bool RankProcesses::running(int id) const {
  io_thread_.assert_held();
  const Entry* e = find(id);
  return e != nullptr && is_running(*e);
}

std::optional<ExitStatus> RankProcesses::exit_status(int id) const {
  io_thread_.assert_held();
  const Entry* e = find(id);
  return e != nullptr ? e->exit : std::nullopt;
}

int RankProcesses::local_guard_pid(int id) const {
  io_thread_.assert_held();
  const Entry* e = find(id);
  return e != nullptr && is_running(*e) ? e->process->local_guard_pid() : -1;
}

void RankProcesses::terminate(int id) {
  io_thread_.assert_held();
  Entry& e = at(id);
  if (is_running(e)) e.process->terminate();
}

void RankProcesses::kill(int id) {
  io_thread_.assert_held();
  Entry& e = at(id);
  if (is_running(e)) e.process->kill();
}

void RankProcesses::stop(int id) {
  io_thread_.assert_held();
  Entry& e = at(id);
  if (!is_running(e)) return;
  e.process->terminate();
  e.kill_timer =
      std::make_unique<asio::steady_timer>(io_, graces_.kill_grace + graces_.guard_slack);
  e.kill_timer->async_wait([this, id](const boost::system::error_code& ec) {
    io_thread_.assert_held();
    if (ec) return;
    kill_late(id);
  });
}

void RankProcesses::end_all(const std::set<int>& hear_abort,
                            std::chrono::milliseconds abort_grace) {
  io_thread_.assert_held();
  for (auto& [id, e] : entries_) {
    if (is_running(e) && (abort_grace.count() == 0 || hear_abort.count(id) == 0)) {
      e.process->terminate();
    }
  }
  auto arm_kill = [this] {
    io_thread_.assert_held();
    end_timer_.expires_after(graces_.kill_grace + graces_.guard_slack);
    end_timer_.async_wait([this](const boost::system::error_code& ec) {
      io_thread_.assert_held();
      if (!ec) kill_running();
    });
  };
  if (abort_grace.count() == 0) {
    arm_kill();
    return;
  }
  end_timer_.expires_after(abort_grace);
  end_timer_.async_wait([this, arm_kill](const boost::system::error_code& ec) {
    io_thread_.assert_held();
    if (ec) return;
    for (auto& [id, e] : entries_) {
      if (is_running(e)) e.process->terminate();
    }
    arm_kill();
  });
}

void RankProcesses::kill_all() {
  io_thread_.assert_held();
  kill_running();
}

void RankProcesses::kill_running() {
  for (auto& [id, e] : entries_) kill_late(id);
}

void RankProcesses::kill_late(int id) {
  Entry& e = at(id);
  if (!is_running(e)) return;
  launcher_log()->warn("{} did not end after SIGTERM; killing its guard", hooks_.who(id));
  e.process->kill();
}

bool RankProcesses::all_exited() const {
  io_thread_.assert_held();
  for (const auto& [id, e] : entries_) {
    if (is_running(e)) return false;
  }
  return true;
}

bool RankProcesses::exited_and_drained() {
  io_thread_.assert_held();
  if (!all_exited()) return false;
  bool all_closed = true;
  for (const auto& [id, e] : entries_) all_closed = all_closed && !e.open[0] && !e.open[1];
  if (all_closed) return true;
  if (!draining_) {
    draining_ = true;
    drain_timer_.expires_after(graces_.drain_timeout);
    drain_timer_.async_wait([this](const boost::system::error_code& ec) {
      io_thread_.assert_held();
      if (ec) return;
      for (auto& [id, e] : entries_) {
        if (e.open[0] || e.open[1]) {
          launcher_log()->warn(
              "{}'s output is still open {} after it exited (a process it started holds it); no "
              "longer reading it",
              hooks_.who(id), hora::format_duration(graces_.drain_timeout));
          e.process->close_output();
        }
      }
    });
  }
  return false;
}

std::map<int, StuckProcess> RankProcesses::stuck(const std::vector<int>& ids) const {
  io_thread_.assert_held();
  std::map<pid_t, int> id_of_guard;
  std::vector<pid_t> guards;
  for (int id : ids) {
    const Entry* e = find(id);
    const int pid = e != nullptr && is_running(*e) ? e->process->local_guard_pid() : -1;
    if (pid > 0 && id_of_guard.emplace(pid, id).second) guards.push_back(pid);
  }
  std::map<int, StuckProcess> out;
  for (const auto& [g, p] : stuck_processes_of_guards(guards)) out.emplace(id_of_guard.at(g), p);
  // Remote ranks: what their host's agent reported (a STATE frame, once a second at most).
  for (int id : ids) {
    const Entry* e = find(id);
    if (e == nullptr || !is_running(*e)) continue;
    if (const auto reported = e->process->reported_state()) out.emplace(id, *reported);
  }
  return out;
}

void RankProcesses::cancel_timers() {
  io_thread_.assert_held();
  end_timer_.cancel();
  drain_timer_.cancel();
  for (auto& [id, e] : entries_) {
    if (e.kill_timer) e.kill_timer->cancel();
  }
}

void RankProcesses::on_output(int id, Stream s, std::string_view data) {
  Entry& e = at(id);
  const int rank = e.output_rank;
  output_.raw(rank, s, data);  // --output-filename: the bytes as written, before line splitting
  e.splitters[static_cast<std::size_t>(s)].feed(data, [&](std::string_view line) {
    output_.line(rank, s, line);
  });
}

void RankProcesses::on_output_closed(int id, Stream s) {
  Entry& e = at(id);
  const int rank = e.output_rank;
  const auto i = static_cast<std::size_t>(s);
  e.splitters[i].finish([&](std::string_view line) { output_.line(rank, s, line); });
  e.open[i] = false;
  if (hooks_.on_output_closed) hooks_.on_output_closed();
}

void RankProcesses::on_exit(int id, const ExitStatus& status) {
  Entry& e = at(id);
  e.exit = status;
  if (e.kill_timer) e.kill_timer->cancel();
  if (hooks_.on_exit) hooks_.on_exit(id, status);
}

}  // namespace hora::cli
