#include "pg_listener.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "pg_queue_sql.h"
#include "pg_session.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {
namespace {

constexpr absl::Duration kPollInterval = absl::Seconds(1);
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(100);
constexpr absl::Duration kMaxBackoff = absl::Seconds(5);

}  // namespace

class QueueListener::WatchHandle : public QueueWatch {
 public:
  WatchHandle(QueueListener& listener, uint64_t id)
      : listener_(listener), id_(id) {}
  ~WatchHandle() override { listener_.Remove(id_); }

 private:
  QueueListener& listener_;
  const uint64_t id_;
};

QueueListener::QueueListener(std::string url, const PostgresOptions& options)
    : url_(std::move(url)), options_(options) {
  if (pipe2(wake_pipe_, O_NONBLOCK | O_CLOEXEC) != 0) {
    wake_pipe_[0] = wake_pipe_[1] = -1;
  }
}

QueueListener::~QueueListener() {
  std::thread thread;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    thread = std::move(thread_);
  }
  Wake();
  if (thread.joinable()) thread.join();
  Disconnect();
  for (int fd : wake_pipe_) {
    if (fd >= 0) close(fd);
  }
}

std::unique_ptr<QueueWatch> QueueListener::Watch(std::string_view queue,
                                                 std::function<void()> poke) {
  if (wake_pipe_[0] < 0) return nullptr;  // no way to wake the thread
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    id = next_id_++;
    watchers_[id] = Watcher{QueueChannel(queue), std::move(poke)};
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  }
  Wake();  // to LISTEN
  return std::make_unique<WatchHandle>(*this, id);
}

void QueueListener::Remove(uint64_t id) {
  absl::MutexLock poking(&poke_mu_);
  absl::MutexLock lock(&mu_);
  watchers_.erase(id);
}

void QueueListener::Wake() {
  if (wake_pipe_[1] < 0) return;
  const char byte = 0;
  // A full pipe already holds a wake-up.
  [[maybe_unused]] ssize_t written = write(wake_pipe_[1], &byte, 1);
}

void QueueListener::WaitForWake(absl::Duration timeout) {
  pollfd wake{wake_pipe_[0], POLLIN, 0};
  poll(&wake, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  char buffer[64];
  while (read(wake_pipe_[0], buffer, sizeof(buffer)) > 0) {
  }
}

void QueueListener::Disconnect() { connection_.reset(); }

void QueueListener::Run() {
  absl::Duration backoff = kFirstBackoff;
  absl::flat_hash_set<std::string> listened;
  bool poke_everyone = false;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    if (connection_ == nullptr) {
      absl::StatusOr<ConnectionHandle> connected = Connect(url_, options_);
      if (!connected.ok()) {
        WaitForWake(backoff);
        backoff = std::min(backoff * 2, kMaxBackoff);
        continue;
      }
      connection_ = std::move(*connected);
      backoff = kFirstBackoff;
      listened.clear();
      poke_everyone = true;  // messages may have arrived while away
    }
    std::vector<std::string> added;
    absl::flat_hash_set<std::string> fired;
    if (!SyncChannels(listened, added)) {
      Disconnect();
      continue;
    }
    fired.insert(added.begin(), added.end());
    if (!fired.empty() || poke_everyone) Poke(fired, poke_everyone);
    poke_everyone = false;
    fired.clear();

    pollfd fds[2] = {{PQsocket(connection_.get()), POLLIN, 0},
                     {wake_pipe_[0], POLLIN, 0}};
    poll(fds, 2, static_cast<int>(absl::ToInt64Milliseconds(kPollInterval)));
    if (fds[1].revents != 0) WaitForWake(absl::ZeroDuration());
    if (!ReadNotifications(fired)) {
      Disconnect();
      continue;
    }
    if (!fired.empty()) Poke(fired, false);
  }
}

bool QueueListener::SyncChannels(absl::flat_hash_set<std::string>& listened,
                                 std::vector<std::string>& added) {
  absl::flat_hash_set<std::string> wanted;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, watcher] : watchers_) wanted.insert(watcher.channel);
  }
  for (const std::string& channel : wanted) {
    if (listened.contains(channel)) continue;
    if (!Execute(connection_.get(), StrCat("LISTEN ", QuoteIdentifier(channel)),
                 "listen")
             .ok()) {
      return false;
    }
    listened.insert(channel);
    added.push_back(channel);
  }
  std::vector<std::string> stale;
  for (const std::string& channel : listened) {
    if (!wanted.contains(channel)) stale.push_back(channel);
  }
  for (const std::string& channel : stale) {
    if (!Execute(connection_.get(),
                 StrCat("UNLISTEN ", QuoteIdentifier(channel)), "unlisten")
             .ok()) {
      return false;
    }
    listened.erase(channel);
  }
  return true;
}

bool QueueListener::ReadNotifications(absl::flat_hash_set<std::string>& fired) {
  if (PQconsumeInput(connection_.get()) == 0 ||
      PQstatus(connection_.get()) != CONNECTION_OK) {
    return false;
  }
  while (PGnotify* notify = PQnotifies(connection_.get())) {
    fired.insert(notify->relname);
    PQfreemem(notify);
  }
  return true;
}

void QueueListener::Poke(const absl::flat_hash_set<std::string>& channels,
                         bool everyone) {
  absl::MutexLock poking(&poke_mu_);
  std::vector<std::function<void()>> pokes;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, watcher] : watchers_) {
      if (everyone || channels.contains(watcher.channel)) {
        pokes.push_back(watcher.poke);
      }
    }
  }
  // Removing a watch waits for poke_mu_, so none of these runs after its
  // watch is gone.
  for (const std::function<void()>& poke : pokes) poke();
}

}  // namespace sluice::postgres_internal
