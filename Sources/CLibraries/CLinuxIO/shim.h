// Linux I/O headers that Swift's Glibc module does not include (epoll, eventfd). No library to link.
#include <sys/epoll.h>
#include <sys/eventfd.h>

// accept4 is a GNU extension that the Glibc module (built without _GNU_SOURCE) does not declare.
struct sockaddr;
extern int accept4(int fd, struct sockaddr *addr, unsigned int *addrlen, int flags);
#include <sys/fsuid.h>
// malloc_trim: hand freed heap back to the system after a burst of connection buffers.
#include <malloc.h>
