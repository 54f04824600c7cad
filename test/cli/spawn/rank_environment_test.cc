// Holds rank_environment() to docs/environment.md: every variable the page lists in its first
// two tables must be in every rank's block, with the value the page describes. And holds the
// page to common/job_environment.h, the contract's one list of names: every name there is in a
// table here and every name in a table is there; kContract is what rank_environment() sets.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "cli/spawn/rank_environment.h"
#include "common/job_environment.h"

using namespace hora::cli;
namespace job_env = hora::job_env;

namespace {

// Variable names in backticks in the first column of the tables before "## Tuning".
std::set<std::string> documented_variables() {
  const char* path = std::getenv("HORA_ENV_DOC");
  REQUIRE(path != nullptr);  // set by test/cli/meson.build
  std::ifstream in(path);
  REQUIRE(in.good());
  std::set<std::string> names;
  std::string line;
  const std::regex name_re("`([A-Z][A-Z0-9_]*)`");
  while (std::getline(in, line)) {
    if (line.rfind("## Tuning", 0) == 0) break;
    if (line.rfind("|", 0) != 0) continue;
    std::string first = line.substr(1, line.find('|', 1) - 1);
    for (std::sregex_iterator it(first.begin(), first.end(), name_re), end; it != end; ++it) {
      names.insert((*it)[1]);
    }
  }
  return names;
}

// Every table row of the page: the names in backticks in its first column, and the rest of the
// row. The header and separator rows name none.
struct DocRow {
  std::set<std::string> names;
  std::string rest;
};

std::vector<DocRow> documented_rows() {
  const char* path = std::getenv("HORA_ENV_DOC");
  REQUIRE(path != nullptr);
  std::ifstream in(path);
  REQUIRE(in.good());
  std::vector<DocRow> rows;
  std::string line;
  const std::regex name_re("`([A-Z][A-Z0-9_]*)`");
  while (std::getline(in, line)) {
    if (line.rfind("|", 0) != 0) continue;
    const std::size_t bar = line.find('|', 1);
    const std::string first = line.substr(1, bar - 1);
    DocRow row;
    for (std::sregex_iterator it(first.begin(), first.end(), name_re), end; it != end; ++it) {
      row.names.insert((*it)[1]);
    }
    if (row.names.empty()) continue;
    row.rest = line.substr(bar);
    rows.push_back(std::move(row));
  }
  return rows;
}

// Every name common/job_environment.h lists; none twice.
std::set<std::string> header_names() {
  std::set<std::string> names;
  auto add = [&](std::string_view name) {
    INFO("listed twice in common/job_environment.h: " << name);
    CHECK(names.insert(std::string(name)).second);
  };
  for (std::string_view name : job_env::kContract) add(name);
  for (std::string_view name : job_env::kSettings) add(name);
  for (const auto& [hora, horovod] : job_env::kHoraToHorovod) {
    INFO("kHoraToHorovod names a hora variable that is not in kSettings: " << hora);
    CHECK(std::find(std::begin(job_env::kSettings), std::end(job_env::kSettings), hora) !=
          std::end(job_env::kSettings));
    add(horovod);
  }
  for (std::string_view name : job_env::kHorovodSettings) add(name);
  for (std::string_view name : job_env::kElasticContract) add(name);
  for (std::string_view name : job_env::kLauncherSettings) add(name);
  for (std::string_view name : job_env::kToolSettings) add(name);
  return names;
}

std::map<std::string, std::string> as_map(const EnvBlock& block) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : block) {
    INFO("variable " << k);
    CHECK(m.count(k) == 0);  // each name once
    m[k] = v;
  }
  return m;
}

JobFacts facts() {
  JobFacts f;
  f.rendezvous = "127.0.0.1:40123";
  f.iface = "lo";
  f.master_addr = "127.0.0.1";
  f.master_port = 29500;
  f.secret_hex = std::string(64, 'a');
  f.start_timeout = std::chrono::seconds(45);
  f.horovod_addr = "127.0.0.1";
  f.horovod_port = 40124;
  f.run_id = "hora-0123456789abcdef";
  return f;
}

}  // namespace

TEST_CASE("every documented variable is set, with the documented value") {
  const std::set<std::string> documented = documented_variables();
  REQUIRE(documented.size() >= 30);  // the page parsed
  RankTable table(parse_host_list("a:3,b:1,c:2"), 6);
  for (int r = 0; r < table.size(); ++r) {
    INFO("rank " << r);
    auto env = as_map(rank_environment(table, r, facts()));
    for (const std::string& name : documented) {
      INFO("documented variable " << name);
      CHECK(env.count(name) == 1);
    }
    const RankInfo& info = table.rank(r);
    const std::string host = table.host_of(r).name;
    const std::map<std::string, std::string> expected = {
        {"HORA_RANK", std::to_string(r)},
        {"HORA_SIZE", "6"},
        {"HORA_LOCAL_RANK", std::to_string(info.local_rank)},
        {"HORA_LOCAL_SIZE", std::to_string(info.local_size)},
        {"HORA_CROSS_RANK", std::to_string(info.cross_rank)},
        {"HORA_CROSS_SIZE", std::to_string(info.cross_size)},
        {"HORA_HOSTNAME", host},
        {"HORA_HOST_INDEX", std::to_string(info.host_index)},
        {"HORA_RENDEZVOUS", "127.0.0.1:40123"},
        {"HORA_IFACE", "lo"},
        {"HORA_SECRET", std::string(64, 'a')},
        {"HORA_START_TIMEOUT", "45"},
        {"HOROVOD_RANK", std::to_string(r)},
        {"HOROVOD_SIZE", "6"},
        {"HOROVOD_LOCAL_RANK", std::to_string(info.local_rank)},
        {"HOROVOD_LOCAL_SIZE", std::to_string(info.local_size)},
        {"HOROVOD_CROSS_RANK", std::to_string(info.cross_rank)},
        {"HOROVOD_CROSS_SIZE", std::to_string(info.cross_size)},
        {"HOROVOD_HOSTNAME", host},
        {"HOROVOD_CONTROLLER", "gloo"},
        {"HOROVOD_CPU_OPERATIONS", "gloo"},
        {"HOROVOD_GLOO_IFACE", "lo"},
        {"HOROVOD_GLOO_RENDEZVOUS_ADDR", "127.0.0.1"},
        {"HOROVOD_GLOO_RENDEZVOUS_PORT", "40124"},
        {"RANK", std::to_string(r)},
        {"WORLD_SIZE", "6"},
        {"LOCAL_RANK", std::to_string(info.local_rank)},
        {"LOCAL_WORLD_SIZE", std::to_string(info.local_size)},
        {"GROUP_RANK", std::to_string(info.host_index)},
        {"ROLE_RANK", std::to_string(r)},
        {"GROUP_WORLD_SIZE", "3"},
        {"ROLE_NAME", "default"},
        {"ROLE_WORLD_SIZE", "6"},
        {"TORCHELASTIC_RUN_ID", "hora-0123456789abcdef"},
        {"TORCHELASTIC_RESTART_COUNT", "0"},
        {"TORCHELASTIC_MAX_RESTARTS", "0"},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", "29500"},
        {"GLOO_SOCKET_IFNAME", "lo"},
        {"NCCL_SOCKET_IFNAME", "lo"},
        {"PYTHONUNBUFFERED", "1"},
    };
    for (const auto& [name, value] : expected) {
      INFO("variable " << name);
      CHECK(env[name] == value);
    }
    // Every variable the launcher sets is documented (or is a -x / --tcp / --log-level extra).
    for (const auto& [name, value] : env) {
      INFO("undocumented variable " << name);
      CHECK(documented.count(name) == 1);
    }
  }
}

TEST_CASE("--log-level, --tcp and -x add to the block; -x wins over the contract") {
  RankTable table(parse_host_list("localhost:2"), 2);
  JobFacts f = facts();
  f.log_level = "debug";
  f.tcp = true;
  f.forwarded = {{"MY_FLAG", "x=y"}, {"MASTER_PORT", "1234"}};
  auto env = as_map(rank_environment(table, 1, f));
  CHECK(env["HORA_LOG_LEVEL"] == "debug");
  CHECK(env["NCCL_IB_DISABLE"] == "1");
  CHECK(env["MY_FLAG"] == "x=y");
  CHECK(env["MASTER_PORT"] == "1234");
  CHECK(is_contract_variable("HORA_RANK"));
  CHECK_FALSE(is_contract_variable("MY_FLAG"));
  // Without the options those variables are absent.
  auto plain = as_map(rank_environment(table, 1, facts()));
  CHECK(plain.count("HORA_LOG_LEVEL") == 0);
  CHECK(plain.count("NCCL_IB_DISABLE") == 0);
  // --no-horovod-rendezvous: no port, no Horovod rendezvous variables.
  JobFacts no_horovod = facts();
  no_horovod.horovod_port = 0;
  auto without = as_map(rank_environment(table, 1, no_horovod));
  CHECK(without.count("HOROVOD_GLOO_RENDEZVOUS_ADDR") == 0);
  CHECK(without.count("HOROVOD_GLOO_RENDEZVOUS_PORT") == 0);
}

TEST_CASE("--max-restarts: TORCHELASTIC_RESTART_COUNT is the attempt, as torchrun sets it") {
  RankTable table(parse_host_list("localhost:2"), 2);
  JobFacts f = facts();
  f.restart_count = 2;
  f.max_restarts = 3;
  for (int r = 0; r < table.size(); ++r) {
    auto env = as_map(rank_environment(table, r, f));
    CHECK(env["TORCHELASTIC_RESTART_COUNT"] == "2");
    CHECK(env["TORCHELASTIC_MAX_RESTARTS"] == "3");
  }
}

TEST_CASE("tuning variables reach every rank; -x still wins") {
  RankTable table(parse_host_list("localhost:2"), 2);
  JobFacts f = facts();
  f.tuning = {{"HORA_CYCLE_TIME_MS", "5"}, {"HORA_TIMELINE", "t.json"}};
  f.forwarded = {{"HORA_CYCLE_TIME_MS", "7"}};
  for (int r = 0; r < 2; ++r) {
    auto env = as_map(rank_environment(table, r, f));
    CHECK(env["HORA_TIMELINE"] == "t.json");
    CHECK(env["HORA_CYCLE_TIME_MS"] == "7");
  }
}

TEST_CASE("NCCL_SOCKET_IFNAME takes every name given for the host; the others the first") {
  RankTable table(parse_host_list("localhost:1"), 1);
  JobFacts f = facts();
  f.iface = "ens5";
  f.nccl_ifnames = "ens5,ib0";
  auto env = as_map(rank_environment(table, 0, f));
  CHECK(env["HORA_IFACE"] == "ens5");
  CHECK(env["GLOO_SOCKET_IFNAME"] == "ens5");
  CHECK(env["HOROVOD_GLOO_IFACE"] == "ens5");
  CHECK(env["NCCL_SOCKET_IFNAME"] == "ens5,ib0");
}

TEST_CASE("OMP_NUM_THREADS=1 only for ranks of hosts with more than one rank, when asked") {
  RankTable table(parse_host_list("a:2,b:1"), 3);
  JobFacts f = facts();
  f.omp_threads_default = true;
  CHECK(as_map(rank_environment(table, 0, f))["OMP_NUM_THREADS"] == "1");
  CHECK(as_map(rank_environment(table, 1, f))["OMP_NUM_THREADS"] == "1");
  CHECK(as_map(rank_environment(table, 2, f)).count("OMP_NUM_THREADS") == 0);  // alone on b
  f.omp_threads_default = false;
  CHECK(as_map(rank_environment(table, 0, f)).count("OMP_NUM_THREADS") == 0);
  // -x wins.
  f.omp_threads_default = true;
  f.forwarded = {{"OMP_NUM_THREADS", "4"}};
  CHECK(as_map(rank_environment(table, 0, f))["OMP_NUM_THREADS"] == "4");
}

TEST_CASE("the launcher's forwarded variables fill in only names nothing else set") {
  RankTable table(parse_host_list("localhost:2"), 2);
  JobFacts f = facts();
  f.inherited = {{"PATH", "/venv/bin:/usr/bin"},
                 {"HORA_RANK", "99"},
                 {"MY_FLAG", "launcher"},
                 {"NCCL_DEBUG", "INFO"}};
  f.forwarded = {{"MY_FLAG", "from -x"}};
  auto env = as_map(rank_environment(table, 1, f));
  CHECK(env["PATH"] == "/venv/bin:/usr/bin");
  CHECK(env["NCCL_DEBUG"] == "INFO");
  CHECK(env["HORA_RANK"] == "1");      // the contract wins
  CHECK(env["MY_FLAG"] == "from -x");  // -x wins
}

TEST_CASE("docs/environment.md's tables and common/job_environment.h name the same variables") {
  const std::vector<DocRow> rows = documented_rows();
  std::set<std::string> documented;
  for (const DocRow& row : rows) documented.insert(row.names.begin(), row.names.end());
  REQUIRE(documented.size() >= 70);  // the page parsed
  const std::set<std::string> listed = header_names();
  REQUIRE(listed.size() >= 70);
  for (const std::string& name : listed) {
    INFO(name << " is in common/job_environment.h but in no table of docs/environment.md");
    CHECK(documented.count(name) == 1);
  }
  for (const std::string& name : documented) {
    INFO(name << " is in a table of docs/environment.md but not in common/job_environment.h");
    CHECK(listed.count(name) == 1);
  }
  // Horovod's name for a setting is documented as the same value as hora's.
  for (const auto& [hora, horovod] : job_env::kHoraToHorovod) {
    INFO("docs/environment.md's row of " << horovod << " names " << hora);
    int found = 0;
    for (const DocRow& row : rows) {
      if (row.names.count(horovod) == 0) continue;
      ++found;
      CHECK(row.rest.find("`" + std::string(hora) + "`") != std::string::npos);
    }
    CHECK(found == 1);
  }
}

TEST_CASE("kContract is every name rank_environment() sets, and only those") {
  RankTable table(parse_host_list("a:2,b:1"), 3);
  JobFacts f = facts();
  f.log_level = "debug";
  f.tcp = true;
  f.omp_threads_default = true;
  const auto env = as_map(rank_environment(table, 0, f));  // every optional variable
  std::set<std::string> contract;
  for (std::string_view name : job_env::kContract) {
    INFO("in kContract but not set by rank_environment(): " << name);
    contract.insert(std::string(name));
    CHECK(env.count(std::string(name)) == 1);
    CHECK(is_contract_variable(std::string(name)));
  }
  for (const auto& [name, value] : env) {
    INFO("set by rank_environment() but not in kContract: " << name);
    CHECK(contract.count(name) == 1);
  }
}
