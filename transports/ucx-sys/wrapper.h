#include <ucp/api/ucp.h>
/* The resource queries of `ovbench devices` (components, memory domains, transports). */
#include <uct/api/uct.h>
