// The master's directory of the other tasks' workers: a task is reached
// lazily when a step first needs it (its published master, then the
// worker it hosts), retried with back-off until the caller's deadline, and
// forgotten when its worker goes down so that the next step reaches it
// again (a restarted task gets a fresh connection).

#include <algorithm>

#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>

#include "actorflow/transport/host_port.hpp"
#include "actorflow/transport/transport.hpp"
#include "master.hpp"

namespace actorflow {

namespace {

void finish_connect(master_self self, const std::string& task, status err,
                    worker_actor peer) {
  auto i = self->state.connecting.find(task);
  if (i == self->state.connecting.end())
    return;
  auto waiters = std::move(i->second);
  self->state.connecting.erase(i);
  self->state.connect_log.erase(task);
  for (auto& w : waiters)
    w.k(err, peer);
}

// TF's progress line while a session's graph waits for `task`, every 10 s
// from the first failed attempt on.
void note_still_waiting(master_self self, const std::string& task,
                        caf::actor_clock::time_point now) {
  auto& st = self->state;
  auto i = st.connecting.find(task);
  if (i == st.connecting.end()
      || std::none_of(i->second.begin(), i->second.end(),
                      [](const auto& w) { return w.for_session; }))
    return;
  constexpr auto period = std::chrono::seconds(10);
  auto [at, fresh] = st.connect_log.try_emplace(task, now + period);
  if (fresh || now < at->second)
    return;
  at->second = now + period;
  log_line(self, "CreateSession still waiting for response from worker: "
                   + task);
}

// The connect loop for `task` failed and would try again at `next`: the
// waiters whose deadline comes first fail now with `why()` (made only
// then: a watch with a long deadline keeps no step waiting past its
// own). True while some still wait.
template <class Why>
bool expire_waiters(master_self self, const std::string& task,
                    caf::actor_clock::time_point next, Why why) {
  auto i = self->state.connecting.find(task);
  if (i == self->state.connecting.end())
    return false;
  std::vector<master_state::peer_waiter> expired;
  auto& waiters = i->second;
  for (auto w = waiters.begin(); w != waiters.end();)
    if (w->deadline <= next) {
      expired.push_back(std::move(*w));
      w = waiters.erase(w);
    } else {
      ++w;
    }
  bool more = !waiters.empty();
  if (!more) {
    self->state.connecting.erase(i);
    self->state.connect_log.erase(task);
  }
  if (!expired.empty()) {
    auto err = why();
    for (auto& w : expired)
      w.k(err, {});
  }
  return more;
}

// The task's master answered: ask it for its worker. A master slow to
// answer (a busy task: many peers starting at once on few cores) is asked
// again until its waiters' deadlines, each wait bounded by the first of
// them; a master that is gone ends them at once.
//
// Each new ask goes through the middleman again (connect_peer) rather
// than to the same handle: when the connection ends right after its
// handshake (both tasks dialing each other at once, each dropping as
// redundant the connection the other kept), the ask was lost with it and
// CAF drops without an answer whatever is sent to the dead proxy later,
// so asking it again would time out until the deadline without ever
// dialing again. The middleman answers at once with the same master while
// its connection lives, and connects afresh once the proxy is gone.
void ask_worker(master_self self, const std::string& task,
                master_actor master) {
  using namespace std::chrono;
  auto now = self->clock().now();
  caf::actor_clock::duration_type wait = seconds(5);
  if (auto i = self->state.connecting.find(task);
      i != self->state.connecting.end())
    for (auto& w : i->second)
      wait = std::min(wait, std::max<caf::actor_clock::duration_type>(
                              w.deadline - now, milliseconds(100)));
  self->request(master, wait, get_worker_atom_v)
    .then(
      [self, task, master](worker_actor& worker) {
        if (!worker) {
          finish_connect(self, task,
                         {error_code::unavailable,
                          "No worker published for " + task},
                         {});
          return;
        }
        peer_found(self, task, master, worker);
      },
      [self, task](caf::error& err) {
        auto why = to_status(err, task);
        if (why.code() != error_code::deadline_exceeded)
          return finish_connect(self, task, why, {});
        auto now = self->clock().now();
        note_still_waiting(self, task, now);
        if (!expire_waiters(self, task, now, [&] { return why; }))
          return;
        auto last = now;
        for (auto& w : self->state.connecting[task])
          last = std::max(last, w.deadline);
        connect_peer(self, task, last, 0);
      });
}

} // namespace

void resolve_peer(master_self self, const std::string& task,
                  caf::actor_clock::time_point deadline, peer_callback k,
                  bool for_session) {
  auto& st = self->state;
  if (task == st.task_prefix) {
    k({}, st.worker);
    return;
  }
  if (auto i = st.peers.find(task); i != st.peers.end()) {
    k({}, i->second);
    return;
  }
  auto& waiters = st.connecting[task];
  waiters.push_back({deadline, std::move(k), for_session});
  if (waiters.size() == 1)
    connect_peer(self, task, deadline, 0);
}

void connect_peer(master_self self, const std::string& task,
                  caf::actor_clock::time_point deadline, int attempt) {
  auto& st = self->state;
  // Nothing waits any more (the task reached this one meanwhile, or every
  // waiter's deadline passed): a retry timer set before does not dial.
  if (st.connecting.count(task) == 0)
    return;
  auto a = st.opts.cluster.find(task);
  if (a == st.opts.cluster.end() || a->second.empty()) {
    finish_connect(self, task,
                   invalid_argument("Task " + task + " is not in the cluster"),
                   {});
    return;
  }
  auto address = a->second;
  host_port hp;
  if (auto err = host_port::parse(address, hp); !err.ok()) {
    finish_connect(self, task,
                   invalid_argument("Could not parse the address of " + task
                                    + ": " + err.message()),
                   {});
    return;
  }
  auto mm = transport_actor(self->home_system());
  self
    ->request(mm, std::chrono::seconds(5), caf::connect_atom::value, hp.host,
              hp.port)
    .then(
      [self, task](const caf::node_id&, caf::strong_actor_ptr& ptr,
                   const std::set<std::string>&) {
        auto master = caf::actor_cast<master_actor>(ptr);
        if (!master) {
          finish_connect(self, task,
                         {error_code::unavailable,
                          "No actor published for " + task},
                         {});
          return;
        }
        ask_worker(self, task, std::move(master));
      },
      [self, task, address, hp, deadline, attempt](caf::error& err) {
        auto now = self->clock().now();
        // Tasks of a cluster start in any order: retry with back-off
        // until the last waiter's deadline.
        auto delay = std::chrono::milliseconds(
          std::min(1000, 50 * (1 << std::min(attempt, 5))));
        auto why = [&] {
          auto tls = last_tls_failure(self->home_system(), hp.host, hp.port);
          return status{error_code::unavailable,
                        "Could not connect to " + task + " at " + address
                          + ": " + self->system().render(err)
                          + (tls.empty() ? "" : " (" + tls + ")")};
        };
        note_still_waiting(self, task, now);
        if (!expire_waiters(self, task, now + delay, why))
          return;
        self->delayed_send(self, delay, caf::connect_atom::value, task,
                           deadline.time_since_epoch().count(), attempt + 1);
      });
}

void peer_found(master_self self, const std::string& task,
                const master_actor& master, const worker_actor& worker) {
  auto& st = self->state;
  st.peers[task] = worker;
  peer_reached(self, task, master);
  // Reached again: the variables it serves need no failover unless it
  // says it no longer serves them (Superseded).
  auto& needed = st.failover_needed;
  for (auto h = needed.begin(); h != needed.end();)
    h = route_of(st, *h) == task ? needed.erase(h) : std::next(h);
  monitoring::registry::instance().peer_changed(
    st.task_prefix, {task, st.opts.cluster[task], true, monitoring::wall_us(),
                     member_note(st, task)});
  // Forget the handle when the peer goes away, so the next step reaches
  // it again.
  self->monitor(worker);
  finish_connect(self, task, {}, worker);
}

bool forget_peer(master_self self, const caf::actor_addr& source,
                 std::string& task, master_actor* master) {
  auto& st = self->state;
  for (auto i = st.peers.begin(); i != st.peers.end(); ++i)
    if (i->second.address() == source) {
      task = i->first;
      st.peers.erase(i);
      if (auto m = st.peer_masters.find(task);
          master != nullptr && m != st.peer_masters.end())
        *master = m->second;
      st.peer_masters.erase(task);
      return true;
    }
  return false;
}

} // namespace actorflow
