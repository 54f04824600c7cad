#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cli/base/errors.h"
#include "cli/hosts/slurm_allocation.h"

using Catch::Matchers::Contains;
using hora::cli::Environment;
using hora::cli::expand_slurm_hostlist;
using hora::cli::HostSpec;
using hora::cli::kMaxSlurmHosts;
using hora::cli::parse_slurm_counts;
using hora::cli::slurm_hosts;
using hora::cli::UsageError;
using Names = std::vector<std::string>;

namespace {

// The message of the UsageError that `f` throws ("" when it throws none).
template <typename F>
std::string usage_error(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("slurm counts: plain, repeated and mixed") {
  CHECK(parse_slurm_counts("1", "V") == std::vector<int>{1});
  CHECK(parse_slurm_counts("2(x3),1", "V") == std::vector<int>{2, 2, 2, 1});
  CHECK(parse_slurm_counts("4,1", "V") == std::vector<int>{4, 1});
  CHECK(parse_slurm_counts("1(x2),3(x1),2(x2)", "V") == std::vector<int>{1, 1, 3, 2, 2});
  CHECK(parse_slurm_counts("0,2", "V") == std::vector<int>{0, 2});
  CHECK(parse_slurm_counts("65536", "V") == std::vector<int>{HostSpec::kMaxSlots});
  CHECK(parse_slurm_counts("1(x65536)", "V").size() == static_cast<size_t>(kMaxSlurmHosts));
}

TEST_CASE("slurm counts: malformed values name the variable, the value and the form") {
  struct Case {
    const char* input;
    const char* why;
  };
  const Case cases[] = {
      {"", "it is empty"},
      {",", "a count between commas is empty"},
      {"2,", "a count between commas is empty"},
      {"2,,1", "a count between commas is empty"},
      {"x", "the count 'x' is not a number"},
      {"-1", "the count '-1' is not a number"},
      {" 2", "the count ' 2' is not a number"},
      {"2 ", "the count '2 ' is not a number"},
      {"+2", "the count '+2' is not a number"},
      {"(x2)", "the count is empty"},
      {"65537", "the count '65537' is too large (at most 65536)"},
      {"99999999999999999999999", "is too large"},
      {"2(3)", "'(3)' after the count 2 is not a repetition '(xN)'"},
      {"2(x3", "'(x3' after the count 2 is not a repetition '(xN)'"},
      {"2x3", "the count '2x3' is not a number"},
      {"2(x)", "'(x)' after the count 2 is not a repetition"},
      {"2(x3)4", "'(x3)4' after the count 2 is not a repetition"},
      {"2(x0)", "'2(x0)' repeats a count 0 times"},
      {"2(xa)", "the repetition 'a' is not a number"},
      {"2(x65537)", "the repetition '65537' is too large"},
      {"1(x65536),1", "it counts more than 65536 nodes"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.input);
    std::string message = usage_error([&] { parse_slurm_counts(c.input, "SLURM_TASKS_PER_NODE"); });
    CHECK_THAT(message, Contains(std::string("SLURM_TASKS_PER_NODE='") + c.input + "'"));
    CHECK_THAT(message, Contains(c.why));
    CHECK_THAT(message, Contains("'2(x3),1'"));
    CHECK_THAT(message, Contains("-H"));
  }
}

TEST_CASE("slurm hostlist: ranges, lists, padding and plain names") {
  CHECK(expand_slurm_hostlist("h[1-3,5],gpu[01-02],login", "V") ==
        Names{"h1", "h2", "h3", "h5", "gpu01", "gpu02", "login"});
  CHECK(expand_slurm_hostlist("login", "V") == Names{"login"});
  CHECK(expand_slurm_hostlist("a,b,c", "V") == Names{"a", "b", "c"});
  CHECK(expand_slurm_hostlist("n[08-11]", "V") == Names{"n08", "n09", "n10", "n11"});
  CHECK(expand_slurm_hostlist("n[9-11]", "V") == Names{"n9", "n10", "n11"});
  CHECK(expand_slurm_hostlist("n[001-3]", "V") == Names{"n001", "n002", "n003"});
  CHECK(expand_slurm_hostlist("n[1-02]", "V") == Names{"n1", "n2"});
  CHECK(expand_slurm_hostlist("n[00-01]", "V") == Names{"n00", "n01"});
  CHECK(expand_slurm_hostlist("n[5]", "V") == Names{"n5"});
  CHECK(expand_slurm_hostlist("n[0-0]", "V") == Names{"n0"});
  CHECK(expand_slurm_hostlist("[1-2]", "V") == Names{"1", "2"});
  CHECK(expand_slurm_hostlist("node-1.cluster_a,node-2", "V") ==
        Names{"node-1.cluster_a", "node-2"});
  // Several bracket groups: every combination, the last group varying fastest (as Slurm does).
  CHECK(expand_slurm_hostlist("r[1-2]n[3-4]", "V") == Names{"r1n3", "r1n4", "r2n3", "r2n4"});
  CHECK(expand_slurm_hostlist("n[1-2][3-4]", "V") == Names{"n13", "n14", "n23", "n24"});
  // Text after a bracket group (Slurm itself rejects it; it is unambiguous, so accept it).
  CHECK(expand_slurm_hostlist("n[1-2]-ib", "V") == Names{"n1-ib", "n2-ib"});
  // Order and duplicates are kept: the list is Slurm's, in its node order.
  CHECK(expand_slurm_hostlist("b,a,b", "V") == Names{"b", "a", "b"});
  CHECK(expand_slurm_hostlist("n[1-65536]", "V").size() == static_cast<size_t>(kMaxSlurmHosts));
}

TEST_CASE("slurm hostlist: malformed expressions name the variable, the value and the form") {
  struct Case {
    const char* input;
    const char* why;
  };
  const Case cases[] = {
      {"", "it is empty"},
      {",", "a node name between commas is empty"},
      {"a,,b", "a node name between commas is empty"},
      {"a,", "a node name between commas is empty"},
      {"n[", "a '[' is never closed"},
      {"n[1-2", "a '[' is never closed"},
      {"n[1-2],m[3", "a '[' is never closed"},
      {"n]", "a ']' closes no '['"},
      {"n[1-2]]", "a ']' closes no '['"},
      {"n[[1]]", "brackets nest"},
      {"n[]", "'[]' holds no range"},
      {"n[a-b]", "a range holds the character 'a'"},
      {"n[ 1-2]", "a range holds the character ' '"},
      {"n[1,,2]", "'[1,,2]' has an empty range"},
      {"n[1,]", "'[1,]' has an empty range"},
      {"n[1-]", "in '[1-]' the bound is empty"},
      {"n[-3]", "in '[-3]' the bound is empty"},
      {"n[1-2-3]", "the bound '2-3' is not a number"},
      {"n[3-1]", "the range '3-1' in '[3-1]' goes down; write it as '1-3'"},
      {"n[1-99999999999]", "names more than 65536 nodes"},
      {"n[1-9999999999999999999999]", "is too large"},
      {"n[1-65536],m", "names more than 65536 nodes"},
      {"r[1-300]n[1-300]", "names more than 65536 nodes"},
      {"n1 n2", "node name 'n1 n2' has the character ' '"},
      {"n1;rm", "has the character ';'"},
      {"user@n1", "has the character '@'"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.input);
    std::string message =
        usage_error([&] { expand_slurm_hostlist(c.input, "SLURM_JOB_NODELIST"); });
    CHECK_THAT(message, Contains(std::string("SLURM_JOB_NODELIST='") + c.input + "'"));
    CHECK_THAT(message, Contains(c.why));
    CHECK_THAT(message, Contains("'h[1-3,5],gpu[01-02],login'"));
  }
}

TEST_CASE("slurm hosts: outside an allocation there are none") {
  CHECK_FALSE(slurm_hosts({}).has_value());
  CHECK_FALSE(slurm_hosts({{"SLURM_JOB_NODELIST", "h[1-2]"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}})
                  .has_value());
  CHECK_FALSE(slurm_hosts({{"SLURM_JOB_ID", ""}}).has_value());
}

TEST_CASE("slurm hosts: SLURM_TASKS_PER_NODE gives each node's slots") {
  // As `salloc -N2 -n3` sets them on the test cluster (scripts/testslurm.sh).
  Environment env{{"SLURM_JOB_ID", "7"},
                  {"SLURM_JOB_NODELIST", "h[1-2]"},
                  {"SLURM_TASKS_PER_NODE", "2,1"},
                  {"SLURM_JOB_CPUS_PER_NODE", "2,1"},
                  {"SLURM_NTASKS", "3"}};
  CHECK(slurm_hosts(env) == std::vector<HostSpec>{{"", "h1", 2}, {"", "h2", 1}});

  // `salloc -n6 -c2`: 4 CPUs but 2 tasks per node; tasks are the slots.
  env = {{"SLURM_JOB_ID", "8"},
         {"SLURM_JOB_NODELIST", "h[1-3]"},
         {"SLURM_TASKS_PER_NODE", "2(x3)"},
         {"SLURM_JOB_CPUS_PER_NODE", "4(x3)"},
         {"SLURM_CPUS_PER_TASK", "2"},
         {"SLURM_NTASKS", "6"}};
  CHECK(slurm_hosts(env) == std::vector<HostSpec>{{"", "h1", 2}, {"", "h2", 2}, {"", "h3", 2}});

  // Without -n (`salloc --exclusive -N2`): no SLURM_NTASKS, every task slot counts.
  env = {{"SLURM_JOB_ID", "9"},
         {"SLURM_JOB_NODELIST", "gpu[01-02],login"},
         {"SLURM_TASKS_PER_NODE", "4(x2),1"}};
  CHECK(slurm_hosts(env) ==
        std::vector<HostSpec>{{"", "gpu01", 4}, {"", "gpu02", 4}, {"", "login", 1}});

  // SLURM_NODELIST, the older name, when SLURM_JOB_NODELIST is unset.
  env = {{"SLURM_JOB_ID", "10"}, {"SLURM_NODELIST", "n[1-2]"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}};
  CHECK(slurm_hosts(env) == std::vector<HostSpec>{{"", "n1", 1}, {"", "n2", 1}});
}

TEST_CASE("slurm hosts: SLURM_JOB_CPUS_PER_NODE when SLURM_TASKS_PER_NODE is unset") {
  Environment env{{"SLURM_JOB_ID", "7"},
                  {"SLURM_JOB_NODELIST", "h[1-2]"},
                  {"SLURM_JOB_CPUS_PER_NODE", "4,3"}};
  CHECK(slurm_hosts(env) == std::vector<HostSpec>{{"", "h1", 4}, {"", "h2", 3}});
  // Divided by SLURM_CPUS_PER_TASK; a node with too few CPUs for one task has no slot.
  env["SLURM_CPUS_PER_TASK"] = "2";
  CHECK(slurm_hosts(env) == std::vector<HostSpec>{{"", "h1", 2}, {"", "h2", 1}});
  env["SLURM_JOB_CPUS_PER_NODE"] = "4,1";
  CHECK(slurm_hosts(env) == std::vector<HostSpec>{{"", "h1", 2}});
  // SLURM_CPUS_PER_TASK does not divide tasks: with SLURM_TASKS_PER_NODE it is ignored.
  env["SLURM_TASKS_PER_NODE"] = "1(x2)";
  CHECK(slurm_hosts(env) == std::vector<HostSpec>{{"", "h1", 1}, {"", "h2", 1}});
}

TEST_CASE("slurm hosts: SLURM_NTASKS caps the slots, the last nodes giving theirs up") {
  Environment env{{"SLURM_JOB_ID", "7"},
                  {"SLURM_JOB_NODELIST", "h[1-3]"},
                  {"SLURM_JOB_CPUS_PER_NODE", "4(x3)"},
                  {"SLURM_NTASKS", "6"}};
  CHECK(slurm_hosts(env) == std::vector<HostSpec>{{"", "h1", 4}, {"", "h2", 2}});
  env["SLURM_NTASKS"] = "12";
  CHECK(slurm_hosts(env) == std::vector<HostSpec>{{"", "h1", 4}, {"", "h2", 4}, {"", "h3", 4}});
  // A cap above the slots does not add any.
  env["SLURM_NTASKS"] = "100";
  CHECK(slurm_hosts(env) == std::vector<HostSpec>{{"", "h1", 4}, {"", "h2", 4}, {"", "h3", 4}});
  env["SLURM_NTASKS"] = "1";
  CHECK(slurm_hosts(env) == std::vector<HostSpec>{{"", "h1", 1}});
}

TEST_CASE("slurm hosts: missing, malformed or disagreeing variables say which and what to do") {
  struct Case {
    Environment env;
    std::vector<const char*> words;
  };
  const Case cases[] = {
      {{{"SLURM_JOB_ID", "7"}, {"SLURM_TASKS_PER_NODE", "1"}},
       {"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST is not set", "-H", "unset SLURM_JOB_ID"}},
      {{{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "h[1-2]"}},
       {"SLURM_JOB_ID=7", "neither SLURM_TASKS_PER_NODE nor SLURM_JOB_CPUS_PER_NODE is set", "-H"}},
      {{{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "h[1-2"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}},
       {"SLURM_JOB_NODELIST='h[1-2'", "never closed", "-H"}},
      {{{"SLURM_JOB_ID", "7"}, {"SLURM_NODELIST", "h[2-1]"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}},
       {"SLURM_NODELIST='h[2-1]'", "goes down"}},
      {{{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "h[1-2]"}, {"SLURM_TASKS_PER_NODE", "2(x)"}},
       {"SLURM_TASKS_PER_NODE='2(x)'", "not a repetition", "-H"}},
      {{{"SLURM_JOB_ID", "7"},
        {"SLURM_JOB_NODELIST", "h[1-2]"},
        {"SLURM_JOB_CPUS_PER_NODE", "4,x"}},
       {"SLURM_JOB_CPUS_PER_NODE='4,x'", "the count 'x' is not a number"}},
      {{{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "h[1-3]"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}},
       {"SLURM_JOB_NODELIST='h[1-3]' names 3 node(s)",
        "SLURM_TASKS_PER_NODE='2(x2)' gives counts for 2", "must match", "-H"}},
      {{{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "h1"}, {"SLURM_TASKS_PER_NODE", "1,1"}},
       {"names 1 node(s)", "gives counts for 2"}},
      {{{"SLURM_JOB_ID", "7"},
        {"SLURM_JOB_NODELIST", "h[1-2]"},
        {"SLURM_JOB_CPUS_PER_NODE", "2(x2)"},
        {"SLURM_CPUS_PER_TASK", "0"}},
       {"SLURM_CPUS_PER_TASK='0'", "at least 1 CPU"}},
      {{{"SLURM_JOB_ID", "7"},
        {"SLURM_JOB_NODELIST", "h[1-2]"},
        {"SLURM_JOB_CPUS_PER_NODE", "2(x2)"},
        {"SLURM_CPUS_PER_TASK", "two"}},
       {"SLURM_CPUS_PER_TASK='two'", "not a number"}},
      {{{"SLURM_JOB_ID", "7"},
        {"SLURM_JOB_NODELIST", "h[1-2]"},
        {"SLURM_TASKS_PER_NODE", "1(x2)"},
        {"SLURM_NTASKS", "-1"}},
       {"SLURM_NTASKS='-1'", "not a number"}},
      {{{"SLURM_JOB_ID", "7"},
        {"SLURM_JOB_NODELIST", "h[1-2]"},
        {"SLURM_TASKS_PER_NODE", "1(x2)"},
        {"SLURM_NTASKS", "0"}},
       {"SLURM_JOB_ID=7", "no slot for a task", "SLURM_NTASKS=0", "-n"}},
      {{{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "h[1-2]"}, {"SLURM_TASKS_PER_NODE", "0,0"}},
       {"SLURM_TASKS_PER_NODE='0,0'", "no slot for a task"}},
  };
  for (const Case& c : cases) {
    std::string message = usage_error([&] { slurm_hosts(c.env); });
    CAPTURE(message);
    REQUIRE_FALSE(message.empty());
    for (const char* word : c.words) CHECK_THAT(message, Contains(word));
  }
}

TEST_CASE("check_not_srun_task: horarun as one task of a multi-task srun step is refused") {
  using hora::cli::check_not_srun_task;
  const Environment step{{"SLURM_JOB_ID", "42"},
                         {"SLURM_STEP_ID", "3"},
                         {"SLURM_STEP_NUM_TASKS", "2"},
                         {"SLURM_NTASKS", "2"},
                         {"SLURM_PROCID", "1"}};
  const std::string msg = usage_error([&] { check_not_srun_task(step); });
  CHECK_THAT(msg,
             Contains("horarun is task 1 of 2 of the Slurm step 42.3 (SLURM_STEP_NUM_TASKS=2)") &&
                 Contains("salloc") && Contains("docs/slurm.md") &&
                 Contains("HORA_ALLOW_SRUN_STEP=1"));
  // SLURM_NTASKS when the step's own count is missing.
  Environment old = step;
  old.erase("SLURM_STEP_NUM_TASKS");
  old["SLURM_NTASKS"] = "4";
  CHECK_THAT(usage_error([&] { check_not_srun_task(old); }), Contains("(SLURM_NTASKS=4)"));
  // Allowed on purpose.
  Environment allowed = step;
  allowed["HORA_ALLOW_SRUN_STEP"] = "1";
  CHECK(usage_error([&] { check_not_srun_task(allowed); }).empty());
  // One task (horarun's own agents: srun --ntasks=1), no step (salloc, sbatch's script), the
  // batch and extern steps, no Slurm at all: not refused.
  Environment one = step;
  one["SLURM_STEP_NUM_TASKS"] = "1";
  CHECK(usage_error([&] { check_not_srun_task(one); }).empty());
  Environment batch = step;
  batch["SLURM_STEP_ID"] = "batch";
  CHECK(usage_error([&] { check_not_srun_task(batch); }).empty());
  Environment salloc = step;
  salloc.erase("SLURM_STEP_ID");
  CHECK(usage_error([&] { check_not_srun_task(salloc); }).empty());
  CHECK(usage_error([&] { check_not_srun_task(Environment{}); }).empty());
}
