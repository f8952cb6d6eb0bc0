// A request's client connection found by its two addresses, and its closing seen (end of stream or reset)
// while data still waiting in it is not taken for an end.
#include "tools/server/client_connection.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace hd::server {
namespace {

// A descriptor closed when it goes out of scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() { close_now(); }
  void close_now() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

struct Address {
  std::string host;
  int port = 0;
};

Address numeric(int fd, bool peer) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  const int got = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length)
                       : getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  EXPECT_EQ(got, 0);
  char host[NI_MAXHOST], port[NI_MAXSERV];
  EXPECT_EQ(getnameinfo(reinterpret_cast<sockaddr*>(&address), length, host, sizeof host, port, sizeof port,
                        NI_NUMERICHOST | NI_NUMERICSERV),
            0);
  return {host, std::atoi(port)};
}

// A loopback TCP connection: the client's end and the server's accepted end.
struct Connection {
  Fd listener{socket(AF_INET, SOCK_STREAM, 0)}, client{socket(AF_INET, SOCK_STREAM, 0)}, served{-1};
  Connection() {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listener.fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    EXPECT_EQ(listen(listener.fd, 1), 0);
    socklen_t length = sizeof address;
    EXPECT_EQ(getsockname(listener.fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
    EXPECT_EQ(connect(client.fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    served.fd = accept(listener.fd, nullptr, nullptr);
    EXPECT_GE(served.fd, 0);
  }
  // What the server's request handler knows: its own address and its client's.
  ClientConnection seen_by_server() const {
    const Address local = numeric(served.fd, false), peer = numeric(served.fd, true);
    return ClientConnection(local.host, local.port, peer.host, peer.port);
  }
};

// gone() polled for up to a second: a closing travels through the kernel, not instantly.
bool becomes_gone(const ClientConnection& c) {
  for (int i = 0; i < 100; ++i) {
    if (c.gone()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(ClientConnection, SeesTheClientCloseButNotItsWaitingData) {
  Connection c;
  const ClientConnection connection = c.seen_by_server();
  ASSERT_TRUE(connection.found());
  EXPECT_FALSE(connection.gone());
  // A pipelined next request waits unread: the client is still there, and the bytes stay for the server.
  ASSERT_EQ(send(c.client.fd, "GET / HTTP/1.1\r\n", 16, 0), 16);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(connection.gone());
  c.client.close_now();
  EXPECT_TRUE(becomes_gone(connection));
  char buffer[32];
  EXPECT_EQ(recv(c.served.fd, buffer, sizeof buffer, 0), 16);  // nothing was consumed by looking
}

TEST(ClientConnection, SeesAReset) {
  Connection c;
  const ClientConnection connection = c.seen_by_server();
  ASSERT_TRUE(connection.found());
  const linger abort_on_close{1, 0};  // close sends RST instead of FIN
  ASSERT_EQ(setsockopt(c.client.fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close), 0);
  c.client.close_now();
  EXPECT_TRUE(becomes_gone(connection));
}

TEST(ClientConnection, AnotherPeerIsNotFoundAndNeverGone) {
  Connection c;
  const Address local = numeric(c.served.fd, false), peer = numeric(c.served.fd, true);
  // The client's own socket has the two addresses swapped: it is not the server's connection.
  const ClientConnection swapped(peer.host, peer.port, local.host, local.port);
  const ClientConnection other_port(local.host, local.port, peer.host, peer.port == 1 ? 2 : 1);
  const ClientConnection other_host(local.host, local.port, "192.0.2.1", peer.port);
  for (const ClientConnection* none : {&other_port, &other_host}) {
    EXPECT_FALSE(none->found());
    EXPECT_FALSE(none->gone());
  }
  // Swapped, the addresses name the client's socket (it is in this process too): found, and not gone.
  EXPECT_TRUE(swapped.found());
  EXPECT_FALSE(swapped.gone());
}

}  // namespace
}  // namespace hd::server
