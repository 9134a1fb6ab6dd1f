/* minidoris bitshuffle: a cursor over input and output buffers. */
#ifndef IOCHAIN_H
#define IOCHAIN_H

#include <stddef.h>

typedef struct {
    const char *in;
    char *out;
} ioc_chain;

void ioc_init(ioc_chain *c, const void *in, void *out);
const void *ioc_get_in(ioc_chain *c, size_t nbytes);
void *ioc_get_out(ioc_chain *c, size_t nbytes);

#endif
