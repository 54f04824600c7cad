#include "cli/hosts/slurm_allocation.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>

#include <fmt/format.h>

#include "cli/base/errors.h"

namespace hora::cli {
namespace {

// What to do about a wrong Slurm variable: Slurm sets them, so a bad one was edited by hand or
// comes from a step that does not match the allocation.
constexpr std::string_view kAdvice =
    "Slurm sets it inside salloc, sbatch and srun; run horarun there without changing it, or give "
    "the hosts with -H";

UsageError bad_variable(std::string_view variable, std::string_view value, const std::string& why,
                        std::string_view expected) {
  return UsageError(
      fmt::format("{}='{}': {}; expected {}. {}", variable, value, why, expected, kAdvice));
}

constexpr std::string_view kCountsForm = "counts such as '2(x3),1' (2 on three nodes, then 1)";
constexpr std::string_view kHostlistForm =
    "node names with bracketed ranges such as 'h[1-3,5],gpu[01-02],login'";

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_slurm_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

// Parses a whole string of decimal digits (no sign, no spaces) into [0, max]. Returns an
// explanation on failure; `what` names the number in it.
std::string parse_number(std::string_view text, std::int64_t max, std::string_view what,
                         std::int64_t& out) {
  if (text.empty()) return fmt::format("{} is empty", what);
  for (char c : text) {
    if (!is_digit(c)) return fmt::format("{} '{}' is not a number", what, text);
  }
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && value > max)) {
    return fmt::format("{} '{}' is too large (at most {})", what, text, max);
  }
  if (ec != std::errc() || end != text.data() + text.size()) {
    return fmt::format("{} '{}' is not a number", what, text);
  }
  out = value;
  return {};
}

// One bracket group "[1-3,5]" (without the brackets): the numbers as text, zero-padded to the
// width of each range's lower bound.
std::string expand_ranges(std::string_view ranges, std::vector<std::string>& out) {
  if (ranges.empty()) return "'[]' holds no range";
  // A number longer than this cannot be a node index (and could overflow).
  constexpr std::int64_t kMaxIndex = 999'999'999'999'999'999;
  size_t start = 0;
  while (start <= ranges.size()) {
    size_t comma = ranges.find(',', start);
    if (comma == std::string_view::npos) comma = ranges.size();
    std::string_view range = ranges.substr(start, comma - start);
    if (range.empty()) return fmt::format("'[{}]' has an empty range", ranges);
    size_t dash = range.find('-');
    std::string_view lo_text = range.substr(0, dash);
    std::string_view hi_text = dash == std::string_view::npos ? lo_text : range.substr(dash + 1);
    std::int64_t lo = 0;
    std::int64_t hi = 0;
    std::string what = fmt::format("in '[{}]' the bound", ranges);
    if (auto why = parse_number(lo_text, kMaxIndex, what, lo); !why.empty()) return why;
    if (auto why = parse_number(hi_text, kMaxIndex, what, hi); !why.empty()) return why;
    if (hi < lo) {
      return fmt::format("the range '{}' in '[{}]' goes down; write it as '{}-{}'", range, ranges,
                         hi_text, lo_text);
    }
    if (hi - lo >= kMaxSlurmHosts ||
        out.size() + static_cast<size_t>(hi - lo + 1) > static_cast<size_t>(kMaxSlurmHosts)) {
      return fmt::format("'[{}]' names more than {} nodes", ranges, kMaxSlurmHosts);
    }
    const size_t width = lo_text.size();
    for (std::int64_t i = lo; i <= hi; ++i) {
      std::string digits = std::to_string(i);
      if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
      out.push_back(std::move(digits));
    }
    start = comma + 1;
  }
  return {};
}

// One item of the list ("gpu[01-02]", "r[1-2]n[3-4]", "login"): appends its names to `names`.
std::string expand_item(std::string_view item, std::vector<std::string>& names) {
  if (item.empty()) return "a node name between commas is empty";
  std::vector<std::string> partial{""};  // every combination so far
  size_t pos = 0;
  while (pos < item.size()) {
    if (item[pos] == '[') {
      size_t close = item.find(']', pos);  // the caller checked that brackets pair up
      std::vector<std::string> numbers;
      if (auto why = expand_ranges(item.substr(pos + 1, close - pos - 1), numbers); !why.empty()) {
        return why;
      }
      if (partial.size() * numbers.size() + names.size() > static_cast<size_t>(kMaxSlurmHosts)) {
        return fmt::format("'{}' names more than {} nodes", item, kMaxSlurmHosts);
      }
      std::vector<std::string> next;
      next.reserve(partial.size() * numbers.size());
      for (const std::string& head : partial) {
        for (const std::string& number : numbers) next.push_back(head + number);
      }
      partial = std::move(next);
      pos = close + 1;
    } else {
      size_t end = pos;
      while (end < item.size() && item[end] != '[') {
        if (!is_slurm_name_char(item[end])) {
          return fmt::format("node name '{}' has the character '{}'", item, item[end]);
        }
        ++end;
      }
      for (std::string& head : partial) head.append(item.substr(pos, end - pos));
      pos = end;
    }
  }
  if (names.size() + partial.size() > static_cast<size_t>(kMaxSlurmHosts)) {
    return fmt::format("the list names more than {} nodes", kMaxSlurmHosts);
  }
  for (std::string& name : partial) names.push_back(std::move(name));
  return {};
}

const std::string* find(const Environment& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

}  // namespace

std::vector<int> parse_slurm_counts(std::string_view text, std::string_view variable) {
  if (text.empty()) throw bad_variable(variable, text, "it is empty", kCountsForm);
  std::vector<int> counts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(start, comma - start);
    if (item.empty()) {
      throw bad_variable(variable, text, "a count between commas is empty", kCountsForm);
    }
    std::string_view count_text = item.substr(0, item.find('('));
    std::int64_t count = 0;
    std::int64_t repeat = 1;
    if (auto why = parse_number(count_text, HostSpec::kMaxSlots, "the count", count);
        !why.empty()) {
      throw bad_variable(variable, text, why, kCountsForm);
    }
    if (count_text.size() < item.size()) {
      std::string_view suffix = item.substr(count_text.size());
      if (suffix.size() < 4 || suffix.substr(0, 2) != "(x" || suffix.back() != ')') {
        throw bad_variable(variable, text,
                           fmt::format("'{}' after the count {} is not a repetition '(xN)'", suffix,
                                       count),
                           kCountsForm);
      }
      std::string_view repeat_text = suffix.substr(2, suffix.size() - 3);
      if (auto why = parse_number(repeat_text, kMaxSlurmHosts, "the repetition", repeat);
          !why.empty()) {
        throw bad_variable(variable, text, why, kCountsForm);
      }
      if (repeat < 1) {
        throw bad_variable(variable, text, fmt::format("'{}' repeats a count 0 times", item),
                           kCountsForm);
      }
    }
    if (counts.size() + static_cast<size_t>(repeat) > static_cast<size_t>(kMaxSlurmHosts)) {
      throw bad_variable(variable, text,
                         fmt::format("it counts more than {} nodes", kMaxSlurmHosts), kCountsForm);
    }
    counts.insert(counts.end(), static_cast<size_t>(repeat), static_cast<int>(count));
    start = comma + 1;
  }
  return counts;
}

std::vector<std::string> expand_slurm_hostlist(std::string_view text, std::string_view variable) {
  if (text.empty()) throw bad_variable(variable, text, "it is empty", kHostlistForm);
  // Split at the commas outside brackets, checking that brackets pair up and do not nest.
  std::vector<std::string_view> items;
  size_t start = 0;
  bool open = false;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || (text[i] == ',' && !open)) {
      if (open) throw bad_variable(variable, text, "a '[' is never closed", kHostlistForm);
      items.push_back(text.substr(start, i - start));
      start = i + 1;
    } else if (text[i] == '[') {
      if (open) throw bad_variable(variable, text, "brackets nest ('[' inside '[')", kHostlistForm);
      open = true;
    } else if (text[i] == ']') {
      if (!open) throw bad_variable(variable, text, "a ']' closes no '['", kHostlistForm);
      open = false;
    } else if (open && !is_digit(text[i]) && text[i] != '-' && text[i] != ',') {
      throw bad_variable(variable, text,
                         fmt::format("a range holds the character '{}' (only digits, '-' and ',')",
                                     text[i]),
                         kHostlistForm);
    }
  }
  std::vector<std::string> names;
  for (std::string_view item : items) {
    if (auto why = expand_item(item, names); !why.empty()) {
      throw bad_variable(variable, text, why, kHostlistForm);
    }
  }
  return names;
}

std::optional<std::vector<HostSpec>> slurm_hosts(const Environment& env) {
  const std::string* job_id = find(env, "SLURM_JOB_ID");
  if (job_id == nullptr || job_id->empty()) return std::nullopt;

  const char* nodelist_var = "SLURM_JOB_NODELIST";
  const std::string* nodelist = find(env, nodelist_var);
  if (nodelist == nullptr) {
    nodelist_var = "SLURM_NODELIST";
    nodelist = find(env, nodelist_var);
  }
  if (nodelist == nullptr) {
    throw UsageError(fmt::format(
        "SLURM_JOB_ID={} says this runs in a Slurm allocation, but SLURM_JOB_NODELIST is not set: "
        "run horarun inside salloc or sbatch as Slurm starts it, unset SLURM_JOB_ID, or give the "
        "hosts with -H",
        *job_id));
  }
  std::vector<std::string> names = expand_slurm_hostlist(*nodelist, nodelist_var);

  const char* counts_var = "SLURM_TASKS_PER_NODE";
  const std::string* counts_text = find(env, counts_var);
  int cpus_per_task = 1;
  if (counts_text == nullptr) {
    counts_var = "SLURM_JOB_CPUS_PER_NODE";
    counts_text = find(env, counts_var);
    if (const std::string* cpt = find(env, "SLURM_CPUS_PER_TASK"); cpt != nullptr) {
      std::int64_t value = 0;
      if (auto why = parse_number(*cpt, HostSpec::kMaxSlots, "the count", value); !why.empty()) {
        throw bad_variable("SLURM_CPUS_PER_TASK", *cpt, why, "a count of CPUs such as '2'");
      }
      if (value < 1) {
        throw bad_variable("SLURM_CPUS_PER_TASK", *cpt, "a task needs at least 1 CPU",
                           "a count of CPUs such as '2'");
      }
      cpus_per_task = static_cast<int>(value);
    }
  }
  if (counts_text == nullptr) {
    throw UsageError(fmt::format(
        "SLURM_JOB_ID={} says this runs in a Slurm allocation, but neither SLURM_TASKS_PER_NODE "
        "nor SLURM_JOB_CPUS_PER_NODE is set, so the slots per node are unknown: run horarun "
        "inside salloc or sbatch as Slurm starts it, or give the hosts with -H",
        *job_id));
  }
  std::vector<int> counts = parse_slurm_counts(*counts_text, counts_var);
  if (counts.size() != names.size()) {
    throw UsageError(fmt::format(
        "{}='{}' names {} node(s) but {}='{}' gives counts for {}; they must match node for "
        "node. {}",
        nodelist_var, *nodelist, names.size(), counts_var, *counts_text, counts.size(), kAdvice));
  }
  for (int& count : counts) count /= cpus_per_task;

  if (const std::string* ntasks = find(env, "SLURM_NTASKS"); ntasks != nullptr) {
    std::int64_t cap = 0;
    if (auto why = parse_number(*ntasks, INT64_MAX, "the count", cap); !why.empty()) {
      throw bad_variable("SLURM_NTASKS", *ntasks, why, "a number of tasks such as '4'");
    }
    std::int64_t total = 0;
    for (int count : counts) total += count;
    // The last nodes give up their slots first.
    for (auto it = counts.rbegin(); it != counts.rend() && total > cap; ++it) {
      std::int64_t give = std::min<std::int64_t>(*it, total - cap);
      *it -= static_cast<int>(give);
      total -= give;
    }
  }

  std::vector<HostSpec> hosts;
  for (size_t i = 0; i < names.size(); ++i) {
    if (counts[i] > 0) hosts.push_back(HostSpec{"", names[i], counts[i]});
  }
  if (hosts.empty()) {
    throw UsageError(fmt::format(
        "the Slurm allocation (SLURM_JOB_ID={}, {}='{}', {}='{}'{}) has no slot for a task: ask "
        "for tasks with salloc/sbatch -n or --ntasks-per-node, or give the hosts with -H",
        *job_id, nodelist_var, *nodelist, counts_var, *counts_text,
        find(env, "SLURM_NTASKS") ? fmt::format(", SLURM_NTASKS={}", env.at("SLURM_NTASKS"))
                                  : std::string()));
  }
  return hosts;
}

void check_not_srun_task(const Environment& env) {
  auto get = [&](std::string_view name) -> std::string {
    auto it = env.find(std::string(name));
    return it == env.end() ? std::string() : it->second;
  };
  const std::string step = get("SLURM_STEP_ID");
  if (step.empty() || !std::all_of(step.begin(), step.end(), is_digit)) return;  // batch, extern
  std::string variable = "SLURM_STEP_NUM_TASKS";
  std::string tasks = get(variable);
  if (tasks.empty()) tasks = get(variable = "SLURM_NTASKS");
  std::int64_t n = 0;
  if (!parse_number(tasks, std::int64_t{1} << 32, variable, n).empty() || n <= 1) return;
  const std::string allow = get(kAllowSrunStepVariable);
  if (allow == "1") return;
  const std::string job = get("SLURM_JOB_ID");
  const std::string task = get("SLURM_PROCID");
  throw UsageError(fmt::format(
      "horarun is task {} of {} of the Slurm step {}.{} ({}={}): srun started {} copies of "
      "horarun, and each would launch a whole job of its own. Run horarun once in the allocation, "
      "without srun: `salloc -N2 --ntasks-per-node=4 horarun python3 train.py`, or the same line "
      "in an sbatch script; horarun takes the hosts and slots from the allocation and starts its "
      "agents on the nodes through srun itself (docs/slurm.md). To run {} separate jobs on "
      "purpose, set {}=1",
      task.empty() ? "?" : task, n, job.empty() ? "?" : job, step, variable, tasks, n, n,
      kAllowSrunStepVariable));
}

}  // namespace hora::cli
