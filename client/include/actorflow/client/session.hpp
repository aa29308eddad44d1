#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actorflow/transport/messages.hpp"
#include "actorflow/graph/ops.hpp"

namespace caf {
class actor_system;
} // namespace caf

namespace actorflow {

/// Something `session::run` can fetch or run: an output (its value), a
/// variable (its current value), an operation, or a name ("n:0" fetches a
/// tensor, "n" runs the node).
struct fetch {
  fetch(const output& x) : name(x.name()), g(x.owner()) {
    // nop
  }
  fetch(const variable& v) : name(v.name()), g(v.op().owner()) {
    // nop
  }
  fetch(const operation& op) : name(op.name()), g(op.owner()), target(true) {
    // nop
  }
  /// "n:i" fetches a tensor; a bare "n" names an operation and runs it
  /// as a target, as `sess.run("init")` does in TensorFlow.
  fetch(std::string tensor_or_op)
    : name(std::move(tensor_or_op)),
      target(name.find(':') == std::string::npos) {
    // nop
  }
  fetch(const char* tensor_or_op) : fetch(std::string{tensor_or_op}) {
    // nop
  }
  std::string name;
  graph* g = nullptr;
  /// Runs the node without fetching a value.
  bool target = false;
};

/// Values fed for tensors of the graph (`feed_dict`). A fed tensor is
/// handed over, not copied: in-process, its buffer may live on in the
/// graph's state (a variable assigned from it, the rows of a FIFOQueue's
/// `enqueue_many`), so the caller must not write into it after `run`;
/// feed a `deep_copy()` of a buffer it reuses.
using feed_dict = std::vector<std::pair<output, tensor>>;

/// Cancels a `session::run` from outside it (TensorFlow's per-step
/// CancellationManager). `cancel()` may be called from any thread, before
/// or during the run: the run fails with Cancelled within `poll_interval`
/// and its step is withdrawn on every task (a dequeue it waited for takes
/// no element), leaving the session usable. `poll`, when set, is called by
/// the waiting thread every `poll_interval` while it waits; returning true
/// cancels (the Python binding checks for Ctrl-C there). Neither blocks.
struct step_cancellation {
  void cancel() {
    requested.store(true, std::memory_order_relaxed);
  }
  bool cancelled() const {
    return requested.load(std::memory_order_relaxed);
  }
  std::function<bool()> poll;
  std::chrono::milliseconds poll_interval{100};
  std::atomic<bool> requested{false};
};

/// A client handle bound to one master (TensorFlow's `tf.Session`).
///
/// `session{}` is a private in-process engine: two of them share nothing.
/// `session{target}` talks to that server's master; sessions on servers of
/// one cluster share variables by name. Runs block the calling thread (not
/// an actor) until the step ends, fails, or its deadline passes.
class session {
public:
  /// A private in-process engine (job "localhost") running `g` (default:
  /// the thread's default graph when the session is created).
  explicit session(session_config config = {}, graph* g = nullptr);
  /// Connects to the master at `target` ("caf://host:port",
  /// "grpc://host:port" or "host:port"). Unavailable, naming the address,
  /// if it cannot be reached within `config.operation_timeout_in_ms` (or
  /// 10 s); InvalidArgument for a malformed target.
  explicit session(const std::string& target, session_config config = {},
                   graph* g = nullptr);
  session(caf::actor_system& sys, const std::string& target,
          session_config config = {}, graph* g = nullptr);

  session(session&&) noexcept;
  session& operator=(session&&) noexcept;
  ~session();

  /// Runs one step: evaluates `fetches` (targets produce no value) with
  /// `feeds`, after sending the master whatever part of the graph it has
  /// not seen. Returns one tensor per fetch (an invalid tensor for
  /// targets). Throws op_error with TensorFlow's code and a message naming
  /// the node: FailedPrecondition (uninitialized variable),
  /// InvalidArgument (bad feed, placement), NotFound (unknown fetch),
  /// DeadlineExceeded (options.timeout_in_ms or the session default),
  /// Unavailable (master or a task lost), Aborted (session closed),
  /// Cancelled (`cancel` asked for it).
  std::vector<tensor> run(const std::vector<fetch>& fetches,
                          const feed_dict& feeds = {},
                          const run_options& options = {},
                          run_metadata* metadata = nullptr,
                          step_cancellation* cancel = nullptr);
  /// Single fetch: its value (invalid for a target).
  tensor run(const fetch& f, const feed_dict& feeds = {},
             const run_options& options = {},
             run_metadata* metadata = nullptr);

  /// Releases the master's session state. Further runs fail (Aborted).
  /// Idempotent.
  void close();

  /// The graph this session runs.
  graph& get_graph() const;

  /// TensorFlow's `Session.reset`: closes every session of the master at
  /// `target` (their next run fails with Aborted) and frees the resources
  /// of `containers` on every task of its cluster; an empty list means each
  /// task's default container (its job name). Variables there must be
  /// initialized again. Blocks until done or
  /// `config.operation_timeout_in_ms` (default 10 s) passes. Errors:
  /// Unavailable (master unreachable), InvalidArgument (malformed target),
  /// DeadlineExceeded.
  static void reset(const std::string& target,
                    const std::vector<std::string>& containers = {},
                    session_config config = {});

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace actorflow
