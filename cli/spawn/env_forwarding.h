// What of the launcher's own environment the ranks get (docs/launcher.md, "Which variables remote
// ranks get"), and the variables that depend on it: torchrun's OMP_NUM_THREADS default.
//
// By default every variable of horarun's environment is forwarded to every rank (over the
// guard's stdin, never on a command line), except the denylist: names that describe this
// machine or this shell session rather than the job. The contract of docs/environment.md and
// -x still win over a forwarded value. --no-env-forwarding restores the minimal behaviour: only
// the contract and -x reach remote ranks.
#pragma once

#include <string>

#include "cli/hosts/rank_table.h"
#include "cli/options/options.h"
#include "cli/spawn/rank_environment.h"

namespace hora::cli {

// True for a name that is never forwarded unless given with -x: HOSTNAME, HOST, HOME, USER,
// LOGNAME, SHELL, PWD, OLDPWD, SHLVL, _, DISPLAY, XAUTHORITY, TMPDIR, TERM*, MAIL,
// DBUS_SESSION_BUS_ADDRESS, KRB5CCNAME, SSH_*, BASH_FUNC_*, XDG_*, and any name ending in
// CUDA_VISIBLE_DEVICES.
bool is_denied_variable(const std::string& name);

// The launcher's variables a rank gets (sorted by name), without the denylist.
EnvBlock forwardable_environment(const Environment& env);

// Fills facts.inherited (unless !forward), facts.run_id and facts.omp_threads_default, and
// prints once that OMP_NUM_THREADS=1 is set when that applies: OMP_NUM_THREADS is neither in
// `env` nor given with -x, and some host runs more than one rank (as torchrun does).
void apply_launcher_environment(const Environment& env, const Options& options,
                                const RankTable& table, JobFacts& facts);

}  // namespace hora::cli
