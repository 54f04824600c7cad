// Who caused a failed job: the fixed job's half of the failure policy (docs/launcher.md, "Failure
// policy"), apart from the timers and the messages, so it can be tested by itself.
//
// The supervisor tells it what it heard, in the order it heard it: a rank reaching the
// rendezvous, a rank leaving it (a drop, or a goodbye), a rank that exited 0 while others ran,
// a rank that failed. decide() then says what to do: nothing yet (the verdict settles while
// other ranks still run), wait for a running rank's exit (it left the rendezvous before every
// failed one, or a failed rank blames it), or end the job naming the cause.
//
// The rule: what happened in one order can be heard in another (an agent reports the exits it
// reaped together; a socket already readable is read first). So the cause is the failed rank
// that left the rendezvous first (a drop or a goodbye; one that did not leave comes after one
// that did; among equals, the one heard first), a running rank that left before it is awaited
// instead, and a rank whose collective failed for a lost peer (it stored that peer at the
// rendezvous, runtime/core/peer_loss.h) hands the blame on to that peer. A host's agent that
// ended is the cause at once, whatever else failed (docs/errors.md: 255).
//
// Threading: none of its own; the supervisor calls it on its io thread (a member it guards).
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli/spawn/rank_process.h"

namespace hora::cli {

class FailureVerdict {
 public:
  struct Failure {
    int rank = -1;
    ExitStatus status;
  };

  // What decide() needs to know about the ranks now.
  struct Ranks {
    int size = 0;
    std::function<bool(int rank)> running;
    // The rank `rank` blames for its failure (what it stored at the rendezvous), or -1.
    std::function<int(int rank)> blamed_by;
  };

  struct Decision {
    enum class Kind {
      kNone,     // no failure yet, or the verdict is still settling
      kAwait,    // wait for `awaited`'s exit (at most the drop grace), then decide again
      kAgent,    // `cause`'s host agent ended: the job ends with 255
      kVerdict,  // `cause` is the first failing rank
    };
    Kind kind = Kind::kNone;
    Failure cause;
    int awaited = -1;
    // kAwait: why it is awaited ("lost its rendezvous connection first"), and whether it was
    // not awaited before (the supervisor logs and arms its timer only then).
    std::string why;
    bool newly_awaited = false;
  };

  // A rank reached the rendezvous: one that left and joins again (init() after shutdown()) has
  // not left any more.
  void connected(int rank);
  // A rank left the rendezvous: cleanly (a goodbye; `at_exit`: from libhora's exit handler) or
  // not (a drop). A rank that said goodbye and then exits non-zero left before the peers it
  // takes down, so a goodbye orders a rank as a drop does, and its exit code decides.
  void left(int rank, bool clean, bool at_exit);
  // A rank exited 0 while others still ran (the first one only is kept): if the job then fails,
  // it is the likely cause (the others lost a peer). `reached_rendezvous`: it had called init().
  void exited_early(int rank, bool reached_rendezvous);
  bool has_early_exit() const { return early_exit_ >= 0; }
  // A rank failed; whether it is the first failure (the supervisor then starts the settle
  // timer).
  bool failed(int rank, const ExitStatus& status);
  // The settle time has passed since the first failure.
  void settle() { settled_ = true; }
  // A running rank awaited for the drop grace without exiting: no longer awaited.
  void stop_awaiting(int rank) { no_longer_awaited_.insert(rank); }

  Decision decide(const Ranks& ranks);

  // "; rank 2 on h2 had already exited with code 0 ..." when a rank left early and another rank
  // (`failed`) then failed in a job that uses hora (`uses_rendezvous`); empty otherwise.
  std::string early_exit_note(int failed, bool uses_rendezvous,
                              const std::function<std::string(int)>& who) const;

 private:
  // Whether rank a left the rendezvous (a drop or a goodbye) before rank b did (or b did not).
  bool left_before(int a, int b) const;
  // Whether a running rank's exit must be awaited before a verdict: it dropped its connection
  // (its drop timer bounds that) or said goodbye from its exit handler, and it has not been
  // awaited for the drop grace already.
  bool awaitable(int rank) const;
  Decision await(int rank, const Failure& cause, std::string why);

  std::vector<Failure> failures_;  // in the order heard; not empty: the verdict is settling
  std::map<int, int> leave_order_;
  std::set<int> dropped_;          // left uncleanly, ranks that had exited included
  std::set<int> leaving_at_exit_;  // said goodbye from the exit handler: their process ends
  std::set<int> no_longer_awaited_;
  int awaited_ = -1;
  bool settled_ = false;
  int early_exit_ = -1;
  bool early_exit_reached_rendezvous_ = false;
};

}  // namespace hora::cli
