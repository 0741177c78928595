// The Store contract, run against every implementation (memory, file, TCP), plus what only the
// TCP store has: tokens, malformed requests, a taken port.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>

#include "comm/setup/store/store.hpp"
#include "comm/setup/store/tcp_store.hpp"
#include "core/error.hpp"
#include "tests/support/process.hpp"
#include "transport/tcp/socket.hpp"

using namespace ouro;
using namespace ouro::store;

namespace {

struct StoreUnderTest {
  std::unique_ptr<test::TempDir> dir;
  std::unique_ptr<TcpStoreServer> server;
  std::function<std::shared_ptr<Store>()> connect;
};

StoreUnderTest makeStore(const std::string& kind) {
  StoreUnderTest s;
  if (kind == "memory") {
    auto shared = makeMemoryStore();
    s.connect = [shared] { return shared; };
  } else if (kind == "file") {
    s.dir = std::make_unique<test::TempDir>();
    std::string path = s.dir->path() + "/store";
    s.connect = [path] { return makeFileStore(path); };
  } else {
    s.server = startTcpStoreServer("127.0.0.1", 0, "job-token");
    int port = s.server->port();
    s.connect = [port] { return connectTcpStore("127.0.0.1", port, "job-token", Deadline::afterSeconds(5)); };
  }
  return s;
}

Deadline soon(double s = 5) { return Deadline::afterSeconds(s); }

}  // namespace

TEST_CASE("every store implements set, get, add, compareSet and waitFor") {
  for (std::string kind : {"memory", "file", "tcp"}) {
    SECTION(kind) {
      auto s = makeStore(kind);
      auto a = s.connect(), b = s.connect();
      CHECK_FALSE(a->tryGet("missing"));
      a->set("k", "v1");
      CHECK(b->get("k", soon()) == "v1");
      std::string binary("a\0b\xff", 4);
      a->set("bin", binary);
      CHECK(b->tryGet("bin") == binary);
      std::string big(1 << 20, 'x');
      a->set("big", big);
      CHECK(b->get("big", soon()) == big);

      CHECK(a->add("counter", 5) == 5);
      CHECK(b->add("counter", -2) == 3);

      CHECK(a->compareSet("cas", std::nullopt, "first") == "first");
      CHECK(b->compareSet("cas", std::nullopt, "second") == "first");
      CHECK(b->compareSet("cas", std::string("first"), "third") == "third");
      CHECK(a->compareSet("cas", std::string("nope"), "fourth") == "third");

      auto missing = a->waitFor({"k", "never1", "never2"}, Deadline::afterSeconds(0.2));
      CHECK(missing == std::vector<std::string>{"never1", "never2"});

      std::thread setter([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        b->set("late", "arrived");
      });
      CHECK(a->get("late", soon()) == "arrived");
      setter.join();
    }
  }
}

TEST_CASE("concurrent adds from many clients are never lost") {
  for (std::string kind : {"memory", "file", "tcp"}) {
    SECTION(kind) {
      auto s = makeStore(kind);
      std::vector<std::thread> threads;
      for (int t = 0; t < 8; t++)
        threads.emplace_back([&] {
          auto client = s.connect();
          for (int i = 0; i < 50; i++) client->add("n", 1);
        });
      for (auto& t : threads) t.join();
      CHECK(s.connect()->add("n", 0) == 400);
    }
  }
}

TEST_CASE("get names the key and the store when the deadline passes") {
  for (std::string kind : {"memory", "file", "tcp"}) {
    SECTION(kind) {
      auto s = makeStore(kind);
      try {
        s.connect()->get("absent/key", Deadline::afterSeconds(0.1));
        FAIL("expected a timeout");
      } catch (const Error& e) {
        CHECK(e.code() == Result::kTimeout);
        CHECK(test::contains(e.message(), "absent/key"));
      }
    }
  }
}

TEST_CASE("keys and values are validated before they are stored") {
  auto s = makeStore("tcp");
  auto c = s.connect();
  CHECK_THROWS_AS(c->set("", "x"), Error);
  CHECK_THROWS_AS(c->set("line\nbreak", "x"), Error);
  CHECK_THROWS_AS(c->set(std::string(kMaxKeyBytes + 1, 'k'), "x"), Error);
  CHECK_THROWS_AS(c->set("k", std::string(kMaxValueBytes + 1, 'v')), Error);
  c->set("still", "usable");
  CHECK(c->get("still", soon()) == "usable");
}

TEST_CASE("the TCP store refuses a client with another job token") {
  auto server = startTcpStoreServer("127.0.0.1", 0, "right");
  try {
    connectTcpStore("127.0.0.1", server->port(), "wrong", soon());
    FAIL("a wrong token must be refused");
  } catch (const Error& e) {
    CHECK(e.code() == Result::kInvalidUsage);
    CHECK(test::contains(e.message(), "OURO_TOKEN"));
  }
  // The server keeps serving the right clients.
  auto ok = connectTcpStore("127.0.0.1", server->port(), "right", soon());
  ok->set("a", "b");
  CHECK(ok->get("a", soon()) == "b");
}

TEST_CASE("the TCP store survives malformed and oversized requests") {
  auto server = startTcpStoreServer("127.0.0.1", 0, "t");
  auto good = connectTcpStore("127.0.0.1", server->port(), "t", soon());
  good->set("before", "1");
  for (int variant = 0; variant < 3; variant++) {
    auto raw = transport::tcp::connectWithRetry("127.0.0.1", server->port(), soon(), "test");
    std::string junk;
    if (variant == 0) junk = "GET / HTTP/1.1\r\nHost: example\r\nAccept: */*\r\n\r\n";  // not our protocol
    if (variant == 1) {                                           // claims a 4 GiB key
      uint32_t h[8] = {0x5352554f, 2, 0xffffffffu, 0, 0, 0, 0, 0};
      junk.assign(reinterpret_cast<char*>(h), sizeof(h));
    }
    if (variant == 2) junk = std::string(10, '\0');  // truncated header, then hang up
    (void)!::write(raw.get(), junk.data(), junk.size());
    char buf[64];
    // The server either answers kRefused or closes; it must not hang us or crash.
    struct timeval tv{2, 0};
    setsockopt(raw.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (variant != 2) CHECK(::read(raw.get(), buf, sizeof(buf)) >= 0);
  }
  CHECK(good->get("before", soon()) == "1");
  good->set("after", "2");
  CHECK(good->get("after", soon()) == "2");
}

TEST_CASE("a taken port is a clear error naming the address") {
  auto first = startTcpStoreServer("127.0.0.1", 0, "t");
  try {
    startTcpStoreServer("127.0.0.1", first->port(), "t");
    FAIL("the second server must not start");
  } catch (const Error& e) {
    CHECK(e.code() == Result::kSystemError);
    CHECK(test::contains(e.message(), "already in use"));
    CHECK(test::contains(e.message(), std::to_string(first->port())));
  }
}

TEST_CASE("a client waiting on a store that never comes up times out clearly") {
  int port = test::freePort();
  try {
    connectTcpStore("127.0.0.1", port, "t", Deadline::afterSeconds(0.3));
    FAIL("nothing listens there");
  } catch (const Error& e) {
    CHECK(e.code() == Result::kTimeout);
    CHECK(test::contains(e.message(), std::to_string(port)));
  }
}
