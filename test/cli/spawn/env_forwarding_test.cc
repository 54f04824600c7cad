// The launcher's environment the ranks get: the denylist, --no-env-forwarding, torchrun's
// OMP_NUM_THREADS default and TORCHELASTIC_RUN_ID.
#include "cli/spawn/env_forwarding.h"

#include <catch2/catch.hpp>

#include "cli/hosts/host_list.h"

using namespace hora::cli;

namespace {

Options options_with(std::vector<std::pair<std::string, std::string>> x = {}) {
  Options o;
  o.env_forward = std::move(x);
  return o;
}

}  // namespace

TEST_CASE("the denylist holds host- and session-specific names") {
  for (const char* name : {"HOSTNAME",
                           "HOST",
                           "HOME",
                           "USER",
                           "LOGNAME",
                           "SHELL",
                           "PWD",
                           "OLDPWD",
                           "SHLVL",
                           "_",
                           "DISPLAY",
                           "XAUTHORITY",
                           "TMPDIR",
                           "SSH_AUTH_SOCK",
                           "SSH_CONNECTION",
                           "BASH_FUNC_module%%",
                           "XDG_RUNTIME_DIR",
                           "TERM",
                           "CUDA_VISIBLE_DEVICES",
                           "ROCR_CUDA_VISIBLE_DEVICES"}) {
    INFO(name);
    CHECK(is_denied_variable(name));
  }
  for (const char* name : {"PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "NCCL_DEBUG", "VIRTUAL_ENV",
                           "OMP_NUM_THREADS", "CUDA_HOME", "MY_SSH_KEY_NAME", "HOSTNAMES"}) {
    INFO(name);
    CHECK_FALSE(is_denied_variable(name));
  }
}

TEST_CASE("every variable but the denied ones is forwarded, sorted by name") {
  const Environment env = {{"PYTHONPATH", "/p"},
                           {"HOSTNAME", "here"},
                           {"A", "1"},
                           {"SSH_TTY", "/dev/pts/1"},
                           {"PATH", "/venv/bin"}};
  CHECK(forwardable_environment(env) ==
        EnvBlock{{"A", "1"}, {"PATH", "/venv/bin"}, {"PYTHONPATH", "/p"}});
}

TEST_CASE("apply_launcher_environment: forwarding on by default, off with the flag") {
  RankTable table(parse_host_list("a:1,b:1"), 2);
  const Environment env = {{"PATH", "/venv/bin"}, {"DISPLAY", ":0"}};
  JobFacts on;
  apply_launcher_environment(env, options_with(), table, on);
  CHECK(on.inherited == EnvBlock{{"PATH", "/venv/bin"}});
  CHECK(on.run_id.rfind("hora-", 0) == 0);
  CHECK(on.run_id.size() == 5 + 16);
  Options minimal = options_with();
  minimal.forward_environment = false;
  JobFacts off;
  apply_launcher_environment(env, minimal, table, off);
  CHECK(off.inherited.empty());
  CHECK(off.run_id != on.run_id);  // new for every job
}

TEST_CASE("OMP_NUM_THREADS defaults to 1 only when unset and some host runs several ranks") {
  RankTable crowded(parse_host_list("a:2,b:1"), 3);
  RankTable spread(parse_host_list("a:1,b:1"), 2);
  JobFacts f;
  apply_launcher_environment({}, options_with(), crowded, f);
  CHECK(f.omp_threads_default);
  apply_launcher_environment({}, options_with(), spread, f);
  CHECK_FALSE(f.omp_threads_default);
  apply_launcher_environment({{"OMP_NUM_THREADS", "8"}}, options_with(), crowded, f);
  CHECK_FALSE(f.omp_threads_default);
  apply_launcher_environment({}, options_with({{"OMP_NUM_THREADS", "2"}}), crowded, f);
  CHECK_FALSE(f.omp_threads_default);
}
