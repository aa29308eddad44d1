// A reader as an actor: requests run one after another, as TF's
// ReaderBase holds its lock across a read. A read that needs the next
// file name sends a dequeue to the filename queue and waits for the reply
// as a pending request (the step's cancellation reaches that queue too).
// The reader runs detached, on a thread of its own, because reading a
// file blocks.

#include <deque>

#include "actorflow/actors/instrumented.hpp"
#include "actorflow/kernels/reader_core.hpp"
#include "node_class.hpp"
#include "runtime.hpp"

namespace actorflow {

namespace {

using reader_promise
  = caf::typed_response_promise<status, std::vector<tensor>>;

struct pending_read {
  reader_op op = reader_op::read;
  queue_actor queue;
  int64_t step = 0;
  reader_core::request req;
  reader_promise rp;
};

struct reader_state {
  std::shared_ptr<reader_core> core;
  std::deque<pending_read> pending;
  /// The front request waits for a file name from its queue.
  bool dequeuing = false;
  static inline const char* name = "actorflow.reader";
};

using reader_self = reader_actor::stateful_pointer<reader_state>;

void reply(pending_read& p, status st, std::vector<tensor> values) {
  p.rp.deliver(std::move(st), std::move(values));
}

// Serves requests from the front until one needs a file name.
void pump(reader_self self) {
  auto& st = self->state;
  while (!st.pending.empty() && !st.dequeuing) {
    auto& p = st.pending.front();
    auto& core = *st.core;
    switch (p.op) {
      case reader_op::num_records_produced:
        reply(p, {}, {tensor::scalar(core.num_records_produced())});
        break;
      case reader_op::num_work_units_completed:
        reply(p, {}, {tensor::scalar(core.num_work_units_completed())});
        break;
      case reader_op::reset:
        core.reset();
        reply(p, {}, {});
        break;
      case reader_op::read:
      case reader_op::read_up_to: {
        if (!core.advance(p.req)) {
          if (!p.queue) {
            reply(p, internal_error("a read without a filename queue"), {});
            break;
          }
          st.dequeuing = true;
          self
            ->request(p.queue, caf::infinite, dequeue_atom_v, p.step)
            .then(
              [self, q = p.queue, step = p.step](
                status& err, std::vector<tensor>& tuple) {
                auto& st = self->state;
                st.dequeuing = false;
                // The reader owns the work unit from now on, whatever
                // becomes of the step: the queue keeps no lease of it.
                if (err.ok())
                  self->send(q, commit_step_atom_v, step);
                auto& front = st.pending.front();
                std::string work;
                if (err.ok())
                  err = reader_core::work_from_tuple(tuple, work);
                if (err.ok())
                  err = st.core->start_work(work);
                if (!err.ok()) {
                  reply(front, std::move(err), {});
                  st.pending.pop_front();
                }
                pump(self);
              },
              [self](caf::error& e) {
                auto& st = self->state;
                st.dequeuing = false;
                reply(st.pending.front(), to_status(e, "filename queue"), {});
                st.pending.pop_front();
                pump(self);
              });
          return;
        }
        if (!p.req.result.ok()) {
          reply(p, p.req.result, {});
        } else if (p.op == reader_op::read) {
          reply(p, {},
                {tensor::scalar(std::move(p.req.keys.at(0))),
                 tensor::scalar(std::move(p.req.values.at(0)))});
        } else {
          reply(p, {}, {tensor::vec(std::move(p.req.keys)),
                          tensor::vec(std::move(p.req.values))});
        }
        break;
      }
    }
    st.pending.pop_front();
  }
}

// Queues a request behind the others (n: read_up_to's count).
reader_promise enqueue(reader_self self, reader_op op, queue_actor queue,
                       int64_t n, int64_t step) {
  pending_read p;
  p.op = op;
  p.queue = std::move(queue);
  p.step = step;
  p.req.num_records = op == reader_op::read_up_to ? n : 1;
  p.req.up_to = op == reader_op::read_up_to;
  p.rp = self->make_response_promise<status, std::vector<tensor>>();
  auto rp = p.rp;
  self->state.pending.push_back(std::move(p));
  pump(self);
  return rp;
}

reader_actor::behavior_type reader(reader_self self,
                                   std::shared_ptr<reader_core> core) {
  self->state.core = std::move(core);
  // A reader that goes (container reset, task stop) answers what waits.
  self->set_exit_handler([self](caf::exit_msg& em) {
    // A container reset says so (Aborted); a task stopping cancels.
    auto why = freed_by_reset(em.reason)
                 ? freed_status(em.reason, "the reader")
                 : status{error_code::cancelled,
                          "the reader was freed (container reset or task "
                          "stop)"};
    for (auto& p : self->state.pending)
      reply(p, why, {});
    self->state.pending.clear();
    self->quit(em.reason);
  });
  return {
    [self](read_record_atom, queue_actor& queue, int64_t step) {
      return enqueue(self, reader_op::read, std::move(queue), 1, step);
    },
    [self](read_up_to_atom, queue_actor& queue, int64_t n, int64_t step) {
      return enqueue(self, reader_op::read_up_to, std::move(queue), n, step);
    },
    [self](records_produced_atom, int64_t step) {
      return enqueue(self, reader_op::num_records_produced, {}, 0, step);
    },
    [self](work_units_completed_atom, int64_t step) {
      return enqueue(self, reader_op::num_work_units_completed, {}, 0, step);
    },
    [self](reset_reader_atom, int64_t step) {
      return enqueue(self, reader_op::reset, {}, 0, step);
    },
    [self](cancel_step_atom, int64_t step) {
      // The front request, if it waits on its queue, ends when the queue
      // cancels that dequeue; the step's others end now.
      auto& st = self->state;
      for (auto i = st.pending.begin(); i != st.pending.end();) {
        if (i->step == step && !(st.dequeuing && i == st.pending.begin())) {
          reply(*i, {error_code::cancelled, "Step was cancelled"}, {});
          i = st.pending.erase(i);
        } else {
          ++i;
        }
      }
    },
  };
}

} // namespace

reader_actor spawn_reader(caf::actor_system& sys,
                          std::shared_ptr<reader_core> core,
                          monitoring::identity who) {
  who.kind = monitoring::actor_kind::reader;
  return spawn_instrumented<caf::detached>(sys, std::move(who), reader,
                                           std::move(core));
}

} // namespace actorflow
