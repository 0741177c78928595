// In-memory store: one map behind a mutex; waiters sleep on a condition variable. For tests that
// run ranks as threads and for single-process use.
#include <condition_variable>
#include <map>
#include <mutex>

#include "comm/setup/store/store.hpp"
#include "core/error.hpp"
#include "core/strings.hpp"

namespace ouro::store {
namespace {

class MemoryStore final : public Store {
 public:
  void set(const std::string& key, std::string_view value) override {
    checkKey(key);
    checkValue(value);
    {
      std::lock_guard lock(mu_);
      map_[key] = std::string(value);
    }
    cv_.notify_all();
  }

  std::optional<std::string> tryGet(const std::string& key) override {
    std::lock_guard lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }

  int64_t add(const std::string& key, int64_t delta) override {
    checkKey(key);
    int64_t result;
    {
      std::lock_guard lock(mu_);
      std::string& v = map_[key];
      auto current = v.empty() ? std::optional<int64_t>(0) : parseInt(v);
      if (!current) raise(Result::kInvalidUsage, "store key '%s' holds a non-integer; add() needs an integer", key.c_str());
      result = *current + delta;
      v = std::to_string(result);
    }
    cv_.notify_all();
    return result;
  }

  std::string compareSet(const std::string& key, const std::optional<std::string>& expected,
                         std::string_view desired) override {
    checkKey(key);
    checkValue(desired);
    std::string after;
    {
      std::lock_guard lock(mu_);
      auto it = map_.find(key);
      bool matches = expected ? (it != map_.end() && it->second == *expected) : it == map_.end();
      if (matches) map_[key] = std::string(desired);
      after = map_[key];
    }
    cv_.notify_all();
    return after;
  }

  std::vector<std::string> waitFor(const std::vector<std::string>& keys, Deadline deadline) override {
    std::unique_lock lock(mu_);
    auto missing = [&] {
      std::vector<std::string> out;
      for (const auto& k : keys)
        if (!map_.count(k)) out.push_back(k);
      return out;
    };
    while (true) {
      auto m = missing();
      if (m.empty() || deadline.expired()) return m;
      cv_.wait_for(lock, std::chrono::nanoseconds(deadline.remainingNs()));
    }
  }

  std::string describe() const override { return "memory"; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> map_;
};

}  // namespace

std::shared_ptr<Store> makeMemoryStore() { return std::make_shared<MemoryStore>(); }

}  // namespace ouro::store
