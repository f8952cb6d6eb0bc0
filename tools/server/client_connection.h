// Whether the client of a request being answered has gone away, so that nothing is made for a reader who
// left. cpp-httplib 0.11 (Debian 12's) gives a handler no socket: the connection's socket is found among
// the process's descriptors by the two addresses the request reports, and looked at without reading it.
#pragma once

#include <string>

namespace hd::server {

class ClientConnection {
 public:
  // The socket whose own address is local_addr:local_port and whose peer is remote_addr:remote_port
  // (numeric, as getnameinfo writes them: what cpp-httplib's Request holds). None found: found() false.
  ClientConnection(const std::string& local_addr, int local_port, const std::string& remote_addr,
                   int remote_port);
  bool found() const { return fd_ >= 0; }
  // The peer closed or reset the connection (an end of stream is waiting to be read, or an error). Data
  // waiting (a pipelined request) is not an end. A client that shuts only its sending side and still
  // reads counts as gone too, as nginx takes it (HTTP clients do not half-close). Never true when the
  // socket was not found.
  bool gone() const;

 private:
  int fd_ = -1;  // not owned: the HTTP server's, open while its handler runs
};

}  // namespace hd::server
