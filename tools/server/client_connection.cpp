#include "tools/server/client_connection.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <utility>

namespace hd::server {

namespace {

// An address as cpp-httplib reports it: getnameinfo's numeric host, and the port.
std::optional<std::pair<std::string, int>> numeric(const sockaddr_storage& address, socklen_t length) {
  if (address.ss_family != AF_INET && address.ss_family != AF_INET6) return std::nullopt;
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host, sizeof host, port, sizeof port,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return std::nullopt;
  return std::pair<std::string, int>(host, std::atoi(port));
}

bool has_addresses(int fd, const std::pair<std::string, int>& local, const std::pair<std::string, int>& peer) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return false;  // not a socket
  if (numeric(address, length) != local) return false;
  length = sizeof address;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return false;  // listening
  return numeric(address, length) == peer;
}

}  // namespace

ClientConnection::ClientConnection(const std::string& local_addr, int local_port, const std::string& remote_addr,
                                   int remote_port) {
  // A TCP connection's two addresses name one socket among the live ones. The scan reads only: another
  // thread opening or closing descriptors meanwhile cannot be harmed, and the one found stays open as
  // long as its request is being answered.
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return;
  const std::pair<std::string, int> local(local_addr, local_port), peer(remote_addr, remote_port);
  while (const dirent* entry = readdir(fds)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(fds)) continue;
    if (has_addresses(int(fd), local, peer)) {
      fd_ = int(fd);
      break;
    }
  }
  closedir(fds);
}

bool ClientConnection::gone() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLRDHUP)) return true;  // reset, or the peer's end of stream
  char byte;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace hd::server
