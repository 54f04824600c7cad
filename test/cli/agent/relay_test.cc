// The fan-out tree's logic (cli/agent/relay.h, relay_stream.h, cli/remote/remote_hosts.h): the
// RELAY_* payloads, which hosts relay which, and how a relayed host's agent link rides on its
// relaying host's link. The relaying host's channel is a fake Stream here (the seam); the
// remote suite's fanout_tree cases run the same code over real SSH on test hosts.
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli/agent/agent_link.h"
#include "cli/agent/frame.h"
#include "cli/agent/relay.h"
#include "cli/agent/relay_stream.h"
#include "cli/remote/remote_hosts.h"

using namespace hora::cli;
using namespace hora::cli::agent;

namespace {

// The relaying host's channel: what the launcher writes is kept; nothing is read from a fd.
class FakeStream : public Stream {
 public:
  explicit FakeStream(std::string* written) : written_(written) {}
  void write(std::string_view data) override { written_->append(data); }
  void close() override { *written_ += "<closed>"; }
  int fd() const override { return -1; }
  Interest interest() const override { return {}; }
  void pump() override {}

 private:
  std::string* written_;
};

std::vector<Frame> frames_of(const std::string& wire) {
  FrameDecoder d;
  d.feed(wire);
  std::vector<Frame> out;
  while (auto f = d.next()) out.push_back(*f);
  REQUIRE(d.error().empty());
  return out;
}

std::string frame(FrameType type, std::uint32_t id, std::string_view payload) {
  std::string out;
  append_frame(out, type, id, payload);
  return out;
}

hora::ssh::Target target(const std::string& alias) {
  hora::ssh::Target t;
  t.alias = alias;
  t.hostname = "198.18.0.13";
  t.user = "alice";
  t.port = 2222;
  t.identity_files = {"/home/alice/.ssh/id_ed25519", "/keys/with space"};
  t.identities_only = true;
  t.connect_timeout = std::chrono::seconds(7);
  t.host_key_policy = hora::ssh::HostKeyPolicy::kNo;
  t.known_hosts_files = {};
  return t;
}

// Asks `parent`'s agent to relay hosts `ids` and answers that each one started.
std::shared_ptr<RelayHub> relay_started(AgentLink& parent, const std::vector<std::uint32_t>& ids) {
  std::shared_ptr<RelayHub> hub = parent.relay_hub();
  RelayOpen open;
  for (std::uint32_t id : ids) {
    open.hosts.push_back(RelayTarget{id, target("h" + std::to_string(id)), "cmd", "READY\n"});
  }
  hub->open(open);
  RelayReady ready;
  ready.ran = ready.started = true;
  for (std::uint32_t id : ids) {
    parent.on_data(frame(FrameType::kRelayReady, id, encode_relay_ready(ready)));
  }
  return hub;
}

}  // namespace

TEST_CASE("RELAY_OPEN carries every field of each host's resolved target") {
  RelayOpen open;
  open.timeout = std::chrono::milliseconds(29500);
  open.max_connecting = 5;
  open.hosts.push_back(RelayTarget{3, target("h3"), "probe; exec horarun --agent", "READY\n"});
  hora::ssh::Target t4 = target("h4");
  t4.identity_files = {};
  t4.identity_files_are_defaults = true;
  t4.known_hosts_files = {"/a", "/b"};
  t4.host_key_policy = hora::ssh::HostKeyPolicy::kAcceptNew;
  open.hosts.push_back(RelayTarget{4, t4, "other", ""});
  const auto back = decode_relay_open(encode_relay_open(open));
  REQUIRE(back);
  CHECK(back->timeout == std::chrono::milliseconds(29500));
  CHECK(back->max_connecting == 5);
  REQUIRE(back->hosts.size() == 2);
  const RelayTarget& h = back->hosts[0];
  CHECK(h.id == 3);
  CHECK(h.target.alias == "h3");
  CHECK(h.target.hostname == "198.18.0.13");
  CHECK(h.target.user == "alice");
  CHECK(h.target.port == 2222);
  CHECK(h.target.identity_files ==
        std::vector<std::string>{"/home/alice/.ssh/id_ed25519", "/keys/with space"});
  CHECK_FALSE(h.target.identity_files_are_defaults);
  CHECK(h.target.identities_only);
  CHECK(h.target.connect_timeout == std::chrono::seconds(7));
  CHECK(h.target.host_key_policy == hora::ssh::HostKeyPolicy::kNo);
  CHECK(h.target.known_hosts_files.empty());
  CHECK(h.command == "probe; exec horarun --agent");
  CHECK(h.marker == "READY\n");
  const RelayTarget& g = back->hosts[1];
  CHECK(g.id == 4);
  CHECK(g.target.identity_files.empty());
  CHECK(g.target.identity_files_are_defaults);
  CHECK(g.target.known_hosts_files == std::vector<std::string>{"/a", "/b"});
  CHECK(g.target.host_key_policy == hora::ssh::HostKeyPolicy::kAcceptNew);
  CHECK(g.marker.empty());
}

TEST_CASE("a RELAY_OPEN that is not one is refused") {
  RelayOpen open;
  open.timeout = std::chrono::milliseconds(1000);
  open.hosts.push_back(RelayTarget{1, target("h1"), "cmd", "m"});
  const std::string good = encode_relay_open(open);
  REQUIRE(decode_relay_open(good));
  CHECK_FALSE(decode_relay_open(""));
  CHECK_FALSE(decode_relay_open(good.substr(0, good.size() - 1)));  // truncated
  std::string other = good;
  other[other.find("relay-open 1") + 11] = '9';  // another format version
  CHECK_FALSE(decode_relay_open(other));
  hora::ssh::Target bad = target("h1");
  bad.port = 0;
  open.hosts[0].target = bad;
  CHECK_FALSE(decode_relay_open(encode_relay_open(open)));
  bad.port = 22;
  bad.hostname.clear();
  open.hosts[0].target = bad;
  CHECK_FALSE(decode_relay_open(encode_relay_open(open)));
}

TEST_CASE("RELAY_READY carries the probe's result, binary output included") {
  RelayReady r;
  r.ran = true;
  r.run.exit_status = 0;
  r.run.out = std::string("HORA-PROBE ok\n\0eth0", 19);
  r.run.err = "warning";
  r.started = true;
  r.started_rest = "\x11\x00\x00";
  r.local_address = "198.18.0.11";
  r.remote_endpoint = "198.18.0.13:12345";
  const auto back = decode_relay_ready(encode_relay_ready(r));
  REQUIRE(back);
  CHECK(back->error.empty());
  CHECK(back->ran);
  CHECK(back->run.out == r.run.out);
  CHECK(back->run.err == "warning");
  CHECK(back->started);
  CHECK(back->started_rest == r.started_rest);
  CHECK(back->local_address == "198.18.0.11");
  CHECK(back->remote_endpoint == "198.18.0.13:12345");
  RelayReady failed;
  failed.error = "h3: connection refused";
  const auto f = decode_relay_ready(encode_relay_ready(failed));
  REQUIRE(f);
  CHECK(f->error == "h3: connection refused");
  CHECK_FALSE(f->ran);
  CHECK_FALSE(f->started);
  CHECK_FALSE(decode_relay_ready(encode_relay_ready(r).substr(3)));
}

TEST_CASE("plan_fanout connects to the first hosts and deals the others among them") {
  using Tree = std::map<int, std::vector<int>>;
  CHECK(plan_fanout({1, 2, 3}, 64) == Tree{{1, {}}, {2, {}}, {3, {}}});
  CHECK(plan_fanout({1, 2, 3}, 3) == Tree{{1, {}}, {2, {}}, {3, {}}});
  CHECK(plan_fanout({1, 2, 3}, 0) == Tree{{1, {}}, {2, {}}, {3, {}}});
  CHECK(plan_fanout({0, 1, 2, 3, 4}, 2) == Tree{{0, {2, 4}}, {1, {3}}});
  CHECK(plan_fanout({5, 6, 7, 8}, 1) == Tree{{5, {6, 7, 8}}});
  CHECK(plan_fanout({}, 4).empty());
}

TEST_CASE("a relayed host's link rides on its relaying host's link") {
  std::string written;
  AgentLink parent("h1", std::make_unique<FakeStream>(&written));
  std::shared_ptr<RelayHub> hub = parent.relay_hub();
  RelayOpen open;
  open.timeout = std::chrono::milliseconds(5000);
  open.hosts.push_back(RelayTarget{7, target("h7"), "cmd", "READY\n"});
  hub->open(open);
  {
    const auto sent = frames_of(written);
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].type == FrameType::kRelayOpen);
    const auto decoded = decode_relay_open(sent[0].payload);
    REQUIRE(decoded);
    CHECK(decoded->hosts.at(0).id == 7);
  }
  CHECK_FALSE(hub->all_ready());
  written.clear();

  // h7's agent started: the relaying agent says so.
  RelayReady ready;
  ready.ran = true;
  ready.started = true;
  ready.remote_endpoint = "198.18.0.17:22";
  parent.on_data(frame(FrameType::kRelayReady, 7, encode_relay_ready(ready)));
  REQUIRE(hub->all_ready());
  REQUIRE(hub->ready(7));
  CHECK(hub->ready(7)->remote_endpoint == "198.18.0.17:22");

  std::unique_ptr<AgentLink> child = link_over_relay("h7 via h1", hub, 7);
  std::string out;
  std::optional<hora::ssh::ExitInfo> exit;
  AgentChannel::Handlers h;
  h.on_stdout = [&](std::string_view d) { out.append(d); };
  h.on_exit = [&](const hora::ssh::ExitInfo& e) { exit = e; };
  auto ch = child->exec("/w", {"--guard"}, std::move(h));
  {
    // The OPEN for h7's agent travels inside a RELAY_DATA frame for host 7.
    const auto sent = frames_of(written);
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].type == FrameType::kRelayData);
    CHECK(sent[0].id == 7);
    const auto inner = frames_of(sent[0].payload);
    REQUIRE(inner.size() == 1);
    CHECK(inner[0].type == FrameType::kOpen);
    const auto req = decode_open(inner[0].payload);
    REQUIRE(req);
    CHECK(req->cwd == "/w");
  }
  // h7's agent answers, split across two RELAY_OUTPUT frames in the middle of a frame.
  const std::string answer = frame(FrameType::kStdout, 1, "hello") +
                             frame(FrameType::kExit, 1, encode_exit(ExitCode{0, 0}));
  parent.on_data(frame(FrameType::kRelayOutput, 7, answer.substr(0, 12)));
  parent.on_data(frame(FrameType::kRelayOutput, 7, answer.substr(12)));
  CHECK(out == "hello");
  REQUIRE(exit);
  CHECK(exit->exit_status == 0);

  // The relaying agent ends: the relayed link ends too, and says why.
  auto ch2 = child->exec("", {"--guard"}, {});
  parent.on_closed("the agent on h1 ended (killed by signal KILL)");
  CHECK(child->closed());
  CHECK_THAT(child->error(), Catch::Contains("h7 via h1") &&
                                 Catch::Contains("the agent on h1 ended (killed by signal KILL)"));
  REQUIRE(ch2->exit());
  CHECK_THAT(ch2->exit()->error, Catch::Contains("killed by signal KILL"));
}

TEST_CASE("closing a relayed link sends RELAY_CLOSE for its host; RELAY_ENDED closes it") {
  std::string written;
  AgentLink parent("h1", std::make_unique<FakeStream>(&written));
  std::shared_ptr<RelayHub> hub = relay_started(parent, {2, 3});
  auto l2 = link_over_relay("h2", hub, 2);
  auto l3 = link_over_relay("h3", hub, 3);
  written.clear();
  l2->close();
  const auto sent = frames_of(written);
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].type == FrameType::kRelayClose);
  CHECK(sent[0].id == 2);
  CHECK_FALSE(l3->closed());
  parent.on_data(frame(FrameType::kRelayEnded, 3, "the connection to its agent ended: reset"));
  CHECK(l3->closed());
  CHECK_THAT(l3->error(), Catch::Contains("reset"));
  CHECK_FALSE(parent.closed());
}

TEST_CASE("a RELAY_OPEN with two hosts under one id, or a timeout past 30 days, is refused") {
  RelayOpen open;
  open.timeout = std::chrono::milliseconds(1000);
  open.hosts.push_back(RelayTarget{1, target("h1"), "cmd", "m"});
  open.hosts.push_back(RelayTarget{1, target("h2"), "cmd", "m"});
  CHECK_FALSE(decode_relay_open(encode_relay_open(open)));
  open.hosts.pop_back();
  open.timeout = std::chrono::hours(24 * 31);
  CHECK_FALSE(decode_relay_open(encode_relay_open(open)));
  open.timeout = std::chrono::milliseconds(1000);
  open.hosts[0].target.connect_timeout = std::chrono::seconds(31LL * 24 * 3600);
  CHECK_FALSE(decode_relay_open(encode_relay_open(open)));
}

TEST_CASE("hosts relayed through an agent that already ended are answered with its end") {
  std::string written;
  AgentLink parent("h1", std::make_unique<FakeStream>(&written));
  parent.on_closed("the agent on h1 ended (exit status 1)");
  std::shared_ptr<RelayHub> hub = parent.relay_hub();
  RelayOpen open;
  open.hosts.push_back(RelayTarget{2, target("h2"), "cmd", "READY\n"});
  hub->open(open);
  CHECK(hub->all_ready());  // nothing to wait for
  CHECK_FALSE(hub->ready(2));
  CHECK(hub->parent_error() == "the agent on h1 ended (exit status 1)");
  CHECK(written.find(static_cast<char>(FrameType::kRelayOpen)) == std::string::npos);
}

TEST_CASE("a relayed link outlives its relaying link's destruction and ends at its next pump") {
  std::string written;
  auto parent = std::make_unique<AgentLink>("h1", std::make_unique<FakeStream>(&written));
  std::shared_ptr<RelayHub> hub = relay_started(*parent, {2});
  auto child = link_over_relay("h2 via h1", hub, 2);
  bool exited = false;
  AgentChannel::Handlers h;
  h.on_exit = [&](const hora::ssh::ExitInfo&) { exited = true; };
  auto ch = child->exec("", {"--guard"}, std::move(h));
  parent.reset();
  CHECK_FALSE(exited);  // no handler runs from inside the parent's destructor
  CHECK_FALSE(child->closed());
  child->stream().pump();
  CHECK(child->closed());
  CHECK(exited);
  CHECK_THAT(child->error(), Catch::Contains("was dropped"));
  child->close();  // nothing left to send it through: no crash, nothing written
}

TEST_CASE("output for a relayed host after its RELAY_ENDED reaches nobody") {
  std::string written;
  AgentLink parent("h1", std::make_unique<FakeStream>(&written));
  std::shared_ptr<RelayHub> hub = relay_started(parent, {2});
  auto child = link_over_relay("h2", hub, 2);
  std::string out;
  AgentChannel::Handlers h;
  h.on_stdout = [&](std::string_view d) { out.append(d); };
  auto ch = child->exec("", {"--guard"}, std::move(h));
  parent.on_data(frame(FrameType::kRelayEnded, 2, "gone"));
  parent.on_data(frame(FrameType::kRelayOutput, 2, frame(FrameType::kStdout, 1, "late")));
  CHECK(out.empty());
  CHECK(child->closed());
  written.clear();
  child.reset();  // its stream ended: no RELAY_CLOSE for a host the agent already dropped
  CHECK(written.empty());
}

TEST_CASE("every RELAY_OPEN to an agent that ended is answered at once, the second one too") {
  std::string written;
  AgentLink parent("h1", std::make_unique<FakeStream>(&written));
  parent.on_closed("the agent on h1 ended (exit status 1)");
  std::shared_ptr<RelayHub> hub = parent.relay_hub();
  for (std::uint32_t id : {2u, 3u}) {
    RelayOpen open;
    open.hosts.push_back(RelayTarget{id, target("h" + std::to_string(id)), "cmd", "READY\n"});
    hub->open(open);
    CHECK(hub->all_ready());
  }
  CHECK(hub->parent_error() == "the agent on h1 ended (exit status 1)");
}
