#include "actorflow/client/queue_runner.hpp"

#include <algorithm>
#include <map>
#include <mutex>

#include "actorflow/client/coordinator.hpp"
#include "actorflow/client/session.hpp"

namespace actorflow {

struct queue_runner::state {
  graph* g = nullptr;
  operation queue;
  std::vector<operation> enqueue_ops;
  operation close_op;
  operation cancel_op;
  std::vector<error_code> closed_codes;

  std::mutex mtx;
  /// Threads still running per session (TF's _runs_per_session).
  std::map<const session*, int> runs_per_session;
  std::vector<std::exception_ptr> exceptions;

  bool queue_closed(error_code code) const {
    return std::find(closed_codes.begin(), closed_codes.end(), code)
           != closed_codes.end();
  }

  /// TF's QueueRunner._run.
  void run(session& sess, const operation& enqueue_op, coordinator* coord) {
    bool decremented = false;
    try {
      for (;;) {
        if (coord != nullptr && coord->should_stop())
          break;
        try {
          sess.run(enqueue_op);
        } catch (const op_error& e) {
          if (!queue_closed(e.code()))
            throw;
          // The queue (or one the op reads) was closed: the last thread to
          // see it closes ours, keeping what is already enqueued.
          std::lock_guard<std::mutex> guard{mtx};
          decremented = true;
          if (--runs_per_session[&sess] == 0) {
            try {
              sess.run(close_op);
            } catch (...) {
              // Intentionally ignored, as TF.
            }
          }
          return;
        }
      }
    } catch (...) {
      if (coord != nullptr) {
        try {
          coord->request_stop(std::current_exception());
        } catch (...) {
          // The coordinator was joined already: nobody to tell.
        }
      } else {
        std::lock_guard<std::mutex> guard{mtx};
        exceptions.push_back(std::current_exception());
      }
    }
    if (!decremented) {
      std::lock_guard<std::mutex> guard{mtx};
      --runs_per_session[&sess];
    }
  }

  /// TF's QueueRunner._close_on_stop.
  void close_on_stop(session& sess, coordinator& coord) {
    coord.wait_for_stop();
    try {
      sess.run(cancel_op);
    } catch (...) {
      // Intentionally ignored, as TF.
    }
  }
};

namespace {

[[noreturn]] void fail(error_code code, std::string msg) {
  throw op_error(code, std::move(msg));
}

void check_op(const operation& op, const graph* g, const std::string& what) {
  if (!op.valid())
    fail(error_code::invalid_argument,
         "QueueRunner: " + what + " is an empty operation");
  if (op.owner() != g)
    fail(error_code::invalid_argument, "QueueRunner: " + what + " '"
                                         + op.name()
                                         + "' must be from the queue's graph");
}

operation lookup(graph& g, const std::string& name, const std::string& what) {
  auto op = g.find_operation(name);
  if (!op.valid())
    fail(error_code::not_found, "QueueRunner: the " + what + " '" + name
                                  + "' is not an operation of the graph");
  return op;
}

} // namespace

queue_runner::queue_runner(const queue_base& queue,
                           std::vector<operation> enqueue_ops,
                           operation close_op, operation cancel_op,
                           std::vector<error_code> queue_closed_codes)
  : state_(std::make_shared<state>()) {
  if (!queue.valid() || enqueue_ops.empty())
    fail(error_code::invalid_argument, "Must provide queue and enqueue_ops.");
  auto& st = *state_;
  st.queue = queue.op();
  st.g = st.queue.owner();
  for (auto& op : enqueue_ops)
    check_op(op, st.g, "enqueue op");
  if (close_op.valid())
    check_op(close_op, st.g, "close op");
  if (cancel_op.valid())
    check_op(cancel_op, st.g, "cancel op");
  // queue_base::close builds in the queue's graph (not the default one);
  // it is not const, hence the copy (which names the same node).
  auto q = queue;
  if (!close_op.valid())
    close_op = q.close(false);
  if (!cancel_op.valid())
    cancel_op = q.close(true);
  st.enqueue_ops = std::move(enqueue_ops);
  st.close_op = close_op;
  st.cancel_op = cancel_op;
  st.closed_codes = queue_closed_codes.empty()
                      ? std::vector<error_code>{error_code::out_of_range}
                      : std::move(queue_closed_codes);
}

queue_runner::queue_runner(graph& g, const queue_runner_def& def)
  : state_(std::make_shared<state>()) {
  auto& st = *state_;
  st.g = &g;
  st.queue = lookup(g, def.queue_name, "queue");
  if (def.enqueue_op_names.empty())
    fail(error_code::invalid_argument, "Must provide queue and enqueue_ops.");
  for (auto& name : def.enqueue_op_names)
    st.enqueue_ops.push_back(lookup(g, name, "enqueue op"));
  st.close_op = lookup(g, def.close_op_name, "close op");
  st.cancel_op = lookup(g, def.cancel_op_name, "cancel op");
  st.closed_codes = {error_code::out_of_range};
}

const std::string& queue_runner::name() const {
  return state_->queue.name();
}

operation queue_runner::queue_op() const {
  return state_->queue;
}

const std::vector<operation>& queue_runner::enqueue_ops() const {
  return state_->enqueue_ops;
}

operation queue_runner::close_op() const {
  return state_->close_op;
}

operation queue_runner::cancel_op() const {
  return state_->cancel_op;
}

const std::vector<error_code>& queue_runner::queue_closed_codes() const {
  return state_->closed_codes;
}

graph& queue_runner::owner() const {
  return *state_->g;
}

queue_runner_def queue_runner::to_def() const {
  queue_runner_def def;
  def.queue_name = state_->queue.name();
  for (auto& op : state_->enqueue_ops)
    def.enqueue_op_names.push_back(op.name());
  def.close_op_name = state_->close_op.name();
  def.cancel_op_name = state_->cancel_op.name();
  return def;
}

std::vector<std::exception_ptr> queue_runner::exceptions_raised() const {
  std::lock_guard<std::mutex> guard{state_->mtx};
  return state_->exceptions;
}

std::vector<std::thread> queue_runner::create_threads(session& sess,
                                                      coordinator* coord) {
  auto st = state_;
  if (&sess.get_graph() != st->g)
    fail(error_code::invalid_argument,
         "QueueRunner " + name()
           + ": the session runs another graph than the queue's");
  {
    std::lock_guard<std::mutex> guard{st->mtx};
    auto& runs = st->runs_per_session[&sess];
    if (runs > 0)
      return {}; // Already started: no new threads.
    runs = static_cast<int>(st->enqueue_ops.size());
    st->exceptions.clear();
  }
  auto prefix = "QueueRunnerThread-" + name() + "-";
  std::vector<std::thread> threads;
  auto* s = &sess;
  for (auto& op : st->enqueue_ops) {
    auto body = [st, s, op, coord] { st->run(*s, op, coord); };
    if (coord != nullptr)
      coord->start_thread(prefix + op.name(), body);
    else
      threads.emplace_back(body);
  }
  if (coord != nullptr)
    coord->start_thread(prefix + st->cancel_op.name(),
                        [st, s, coord] { st->close_on_stop(*s, *coord); });
  return threads;
}

void add_queue_runner(const queue_runner& qr) {
  qr.owner().add_queue_runner(qr.to_def());
}

std::size_t start_queue_runners(session& sess, coordinator& coord) {
  auto& g = sess.get_graph();
  // Look every record up before starting anything.
  std::vector<queue_runner> runners;
  for (auto& def : g.queue_runners())
    runners.emplace_back(g, def);
  std::size_t started = 0;
  for (auto& qr : runners) {
    qr.create_threads(sess, &coord);
    started += qr.enqueue_ops().size() + 1;
  }
  return started;
}

} // namespace actorflow
