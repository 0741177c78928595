// Rendezvous key-value store (Gloo's Store, torch's c10d Store): how ranks find each other before
// any transport exists. Three implementations: in-memory (tests, threads), file (a shared file
// system directory), TCP (a server run by rank 0 or by the launcher; many clients).
// Every blocking call takes a deadline; running out of time is an Error(kTimeout).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.hpp"

namespace ouro::store {

constexpr size_t kMaxKeyBytes = 4096;
constexpr size_t kMaxValueBytes = size_t(16) << 20;

class Store {
 public:
  virtual ~Store() = default;

  virtual void set(const std::string& key, std::string_view value) = 0;
  // The value if the key exists now; never waits.
  virtual std::optional<std::string> tryGet(const std::string& key) = 0;
  // Adds delta to the integer stored at key (absent counts as 0); returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Stores desired if the current value equals expected (nullopt: the key is absent); returns the
  // value after the operation, so the caller sees who won.
  virtual std::string compareSet(const std::string& key, const std::optional<std::string>& expected,
                                 std::string_view desired) = 0;
  // Waits until every key exists or the deadline passes; returns the keys still missing then.
  virtual std::vector<std::string> waitFor(const std::vector<std::string>& keys, Deadline deadline) = 0;
  // "tcp://127.0.0.1:29500", "file:///tmp/x", "memory": for messages.
  virtual std::string describe() const = 0;
  // The caller expects no requests for a while (bootstrap done): a network store may drop its
  // connection and reconnect on the next request, so the server's process can exit cleanly.
  virtual void idle() {}
  // The local IP address this process reaches a network store from ("" when not networked):
  // the best guess of the address peers can reach this host at.
  virtual std::string localAddress() const { return ""; }

  // Waits for key and returns its value; kTimeout naming the key and the store on expiry.
  std::string get(const std::string& key, Deadline deadline);
};

// Validates a key/value before it is stored or sent (kInvalidArgument on violation).
void checkKey(const std::string& key);
void checkValue(std::string_view value);

std::shared_ptr<Store> makeMemoryStore();
// A directory on a (shared) file system; created if missing. Keys become files written atomically.
std::shared_ptr<Store> makeFileStore(const std::string& directory);

}  // namespace ouro::store
