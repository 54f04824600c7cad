// --bind-to and --map-by: the share-out of a host's CPUs, the sysfs topology behind socket and
// numa (a fake sysfs tree in a temporary folder), and what a bad request says. The real binding
// of real ranks is checked by test/integration (cases bind-to and bind-to-socket).
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/spawn/cpu_binding.h"
#include "cli/spawn/cpu_topology.h"

using Catch::Matchers::Contains;
using hora::cli::BindingVariables;
using hora::cli::cpus_for_rank;
using hora::cli::format_cpu_list;
using hora::cli::parse_cpu_list;
using hora::cli::plan_cpu_binding;
using hora::cli::read_cpu_topology;
using V = std::vector<int>;
namespace fs = std::filesystem;

namespace {

// A sysfs tree: CPU c on socket packages[c]; NUMA node n holds nodes[n] (none: no node folder).
class FakeSysfs {
 public:
  FakeSysfs(const V& packages, const std::vector<std::string>& nodes) {
    std::string templ = (fs::temp_directory_path() / "hora-sysfs-XXXXXX").string();
    REQUIRE(::mkdtemp(templ.data()) != nullptr);
    root_ = templ;
    for (std::size_t c = 0; c < packages.size(); ++c) {
      write(fmt("devices/system/cpu/cpu" + std::to_string(c) + "/topology/physical_package_id"),
            std::to_string(packages[c]) + "\n");
    }
    fs::create_directories(root_ / "devices/system/cpu/cpufreq");  // not a CPU
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      write(fmt("devices/system/node/node" + std::to_string(n) + "/cpulist"), nodes[n] + "\n");
    }
  }
  ~FakeSysfs() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  FakeSysfs(const FakeSysfs&) = delete;
  FakeSysfs& operator=(const FakeSysfs&) = delete;

  std::string root() const { return root_.string(); }
  void write(const fs::path& relative, const std::string& text) const {
    fs::create_directories((root_ / relative).parent_path());
    std::ofstream(root_ / relative) << text;
  }

 private:
  static fs::path fmt(const std::string& s) { return fs::path(s); }
  fs::path root_;
};

// 2 sockets x 4 CPUs (0-3, 4-7), 4 NUMA nodes of 2 CPUs.
const V kTwoSockets{0, 0, 0, 0, 1, 1, 1, 1};
const std::vector<std::string> kFourNodes{"0-1", "2-3", "4-5", "6-7"};
const V kAll{0, 1, 2, 3, 4, 5, 6, 7};

// The CPU list each local rank of `size` gets, as "0-3 | 4-7".
std::string plan(const FakeSysfs& sys, const V& allowed, const char* bind, const char* map,
                 int size) {
  std::string out;
  for (int r = 0; r < size; ++r) {
    BindingVariables v;
    if (bind != nullptr) v.bind_to = bind;
    if (map != nullptr) v.map_by = map;
    v.local_rank = std::to_string(r);
    v.local_size = std::to_string(size);
    V cpus;
    auto error = plan_cpu_binding(v, allowed, sys.root(), cpus);
    if (error) return "error: " + *error;
    out += (r == 0 ? "" : " | ") + (cpus.empty() ? std::string("unbound") : format_cpu_list(cpus));
  }
  return out;
}

}  // namespace

TEST_CASE("each local rank gets an equal run of the allowed CPUs") {
  const V eight{0, 1, 2, 3, 4, 5, 6, 7};
  CHECK(cpus_for_rank(eight, 0, 2) == V{0, 1, 2, 3});
  CHECK(cpus_for_rank(eight, 1, 2) == V{4, 5, 6, 7});
  CHECK(cpus_for_rank(eight, 2, 3) == V{4, 5});  // 8 / 3 = 2 each; CPUs 6 and 7 stay unused
  CHECK(cpus_for_rank(eight, 0, 1) == eight);
  // Only the CPUs this process may use (a cpuset), in their order.
  CHECK(cpus_for_rank(V{2, 3, 10, 11}, 1, 2) == V{10, 11});
}

TEST_CASE("more ranks than CPUs share them round-robin, one CPU each") {
  const V two{0, 1};
  CHECK(cpus_for_rank(two, 0, 4) == V{0});
  CHECK(cpus_for_rank(two, 1, 4) == V{1});
  CHECK(cpus_for_rank(two, 2, 4) == V{0});
  CHECK(cpus_for_rank(two, 3, 4) == V{1});
  CHECK(cpus_for_rank(V{5}, 2, 3) == V{5});
}

TEST_CASE("CPU lists print and parse as Linux writes them") {
  CHECK(format_cpu_list(V{0, 1, 2, 3}) == "0-3");
  CHECK(format_cpu_list(V{0, 2, 3, 4, 8}) == "0,2-4,8");
  CHECK(format_cpu_list(V{7}) == "7");
  CHECK(format_cpu_list(V{}).empty());
  CHECK(parse_cpu_list("0-3,8") == V{0, 1, 2, 3, 8});
  CHECK(parse_cpu_list("5") == V{5});
  CHECK(parse_cpu_list("") == V{});
  CHECK_FALSE(parse_cpu_list("3-1"));
  CHECK_FALSE(parse_cpu_list("a"));
  CHECK_FALSE(parse_cpu_list("1-2x"));
}

TEST_CASE("the topology comes from sysfs: sockets by package id, NUMA nodes by cpulist") {
  FakeSysfs sys({0, 1, 0, 1}, {"0,2", "1,3"});  // interleaved numbering, as on many 2-socket hosts
  const auto topo = read_cpu_topology(sys.root());
  CHECK(topo.sockets == std::vector<V>{{0, 2}, {1, 3}});
  CHECK(topo.numa_nodes == std::vector<V>{{0, 2}, {1, 3}});
  FakeSysfs flat({0, 0, 0}, {});  // no node folder: one node of every CPU
  CHECK(read_cpu_topology(flat.root()).numa_nodes == std::vector<V>{{0, 1, 2}});
  CHECK(read_cpu_topology(flat.root()).sockets == std::vector<V>{{0, 1, 2}});
  FakeSysfs memory_only({0, 0}, {"0-1", ""});  // a node with memory and no CPU is left out
  CHECK(read_cpu_topology(memory_only.root()).numa_nodes == std::vector<V>{{0, 1}});
}

TEST_CASE("a bad topology says which file") {
  FakeSysfs sys(kTwoSockets, kFourNodes);
  sys.write("devices/system/cpu/cpu2/topology/physical_package_id", "two\n");
  CHECK_THROWS_WITH(read_cpu_topology(sys.root()),
                    Contains("cpu2/topology/physical_package_id") && Contains("'two'"));
  CHECK_THAT(plan(sys, kAll, "socket", nullptr, 2), Contains("--bind-to socket") &&
                                                        Contains("physical_package_id") &&
                                                        Contains("--bind-to core or none"));
  FakeSysfs bad_node(kTwoSockets, {"0-3", "7-4"});
  CHECK_THROWS_WITH(read_cpu_topology(bad_node.root()), Contains("node1/cpulist"));
  FakeSysfs none({}, {});
  CHECK_THROWS_WITH(read_cpu_topology(none.root()), Contains("no CPU listed"));
}

TEST_CASE("--bind-to socket|numa without --map-by places ranks as mpirun's default mapping") {
  FakeSysfs sys(kTwoSockets, kFourNodes);
  // At most 2 local ranks: mpirun maps by core (rank r on core r), then binds to its object.
  CHECK(plan(sys, kAll, "socket", nullptr, 1) == "0-3");
  CHECK(plan(sys, kAll, "socket", nullptr, 2) == "0-3 | 0-3");
  CHECK(plan(sys, kAll, "numa", nullptr, 2) == "0-1 | 0-1");
  // More: mpirun maps by NUMA node, round-robin.
  CHECK(plan(sys, kAll, "socket", nullptr, 4) == "0-3 | 0-3 | 4-7 | 4-7");
  CHECK(plan(sys, kAll, "numa", nullptr, 4) == "0-1 | 2-3 | 4-5 | 6-7");
  CHECK(plan(sys, kAll, "numa", nullptr, 5) == "0-1 | 2-3 | 4-5 | 6-7 | 0-1");
  // A host with no NUMA nodes in sysfs: one node holding both sockets, so the ranks mapped
  // there take its sockets in turn.
  FakeSysfs flat(kTwoSockets, {});
  CHECK(plan(flat, kAll, "socket", nullptr, 3) == "0-3 | 4-7 | 0-3");
  CHECK(plan(flat, kAll, "numa", nullptr, 2) == "0-7 | 0-7");
}

TEST_CASE("--map-by socket|numa deals local ranks round-robin, and binds there by default") {
  FakeSysfs sys(kTwoSockets, kFourNodes);
  // mpirun's man page: --map-by socket --bind-to socket at -np 4 gives 000f, 00f0, 000f, 00f0.
  CHECK(plan(sys, kAll, nullptr, "socket", 4) == "0-3 | 4-7 | 0-3 | 4-7");
  CHECK(plan(sys, kAll, "socket", "socket", 4) == "0-3 | 4-7 | 0-3 | 4-7");
  CHECK(plan(sys, kAll, nullptr, "numa", 3) == "0-1 | 2-3 | 4-5");
  CHECK(plan(sys, kAll, "none", "socket", 4) == "unbound | unbound | unbound | unbound");
  // Bound below the mapping: a share of the place, round-robin over what is inside it.
  CHECK(plan(sys, kAll, "core", "socket", 4) == "0-1 | 4-5 | 2-3 | 6-7");
  CHECK(plan(sys, kAll, "core", "socket", 2) == "0-3 | 4-7");
  CHECK(plan(sys, kAll, "core", "numa", 8) == "0 | 2 | 4 | 6 | 1 | 3 | 5 | 7");
  CHECK(plan(sys, kAll, "numa", "socket", 4) == "0-1 | 4-5 | 2-3 | 6-7");
  // Bound above the mapping: the whole object holding the place.
  CHECK(plan(sys, kAll, "socket", "numa", 4) == "0-3 | 0-3 | 4-7 | 4-7");
  // By core (or slot) is mpirun's --map-by core: rank r on CPU r, whatever the rank count.
  CHECK(plan(sys, kAll, "socket", "core", 4) == "0-3 | 0-3 | 0-3 | 0-3");
  CHECK(plan(sys, kAll, "numa", "slot", 3) == "0-1 | 0-1 | 2-3");
  // --bind-to core without socket or numa keeps hora's equal shares of the mask.
  CHECK(plan(sys, kAll, "core", "core", 4) == "0-1 | 2-3 | 4-5 | 6-7");
  CHECK(plan(sys, kAll, "core", nullptr, 2) == "0-3 | 4-7");
}

TEST_CASE("sockets and NUMA nodes count only the CPUs of the affinity mask") {
  FakeSysfs sys(kTwoSockets, kFourNodes);
  const V cpuset{2, 3, 4, 5, 6};  // node 0 is outside; socket 0 keeps 2-3, node 3 keeps 6
  CHECK(plan(sys, cpuset, "socket", nullptr, 2) == "2-3 | 2-3");
  CHECK(plan(sys, cpuset, nullptr, "socket", 2) == "2-3 | 4-6");
  CHECK(plan(sys, cpuset, "numa", nullptr, 4) == "2-3 | 4-5 | 6 | 2-3");
  CHECK(plan(sys, cpuset, "core", "socket", 4) == "2 | 4 | 3 | 5");
}

TEST_CASE("no binding asked for binds nothing; a bad request says what to change") {
  FakeSysfs sys(kTwoSockets, kFourNodes);
  CHECK(plan(sys, kAll, nullptr, nullptr, 2) == "unbound | unbound");
  CHECK(plan(sys, kAll, "none", nullptr, 2) == "unbound | unbound");
  CHECK(plan(sys, kAll, "", "", 2) == "unbound | unbound");
  CHECK_THAT(plan(sys, kAll, "board", nullptr, 2),
             Contains("HORA_BIND_TO='board'") && Contains("none, core, socket or numa"));
  CHECK_THAT(plan(sys, kAll, nullptr, "node", 2),
             Contains("HORA_MAP_BY='node'") && Contains("slot, core, socket or numa"));
  V cpus;
  auto no_rank =
      plan_cpu_binding({"socket", std::nullopt, std::nullopt, "2"}, kAll, sys.root(), cpus);
  REQUIRE(no_rank);
  CHECK_THAT(*no_rank, Contains("--bind-to socket") && Contains("HORA_LOCAL_RANK"));
  auto out_of_range = plan_cpu_binding({"core", std::nullopt, "2", "2"}, kAll, sys.root(), cpus);
  REQUIRE(out_of_range);
  CHECK_THAT(*out_of_range, Contains("HORA_LOCAL_SIZE"));
  // Binding to core never reads the topology: a host without sysfs still binds to core.
  auto core = plan_cpu_binding({"core", std::nullopt, "1", "2"}, kAll, "/nonexistent", cpus);
  CHECK_FALSE(core);
  CHECK(cpus == V{4, 5, 6, 7});
}
