/* minidoris bitshuffle: a cursor over input and output buffers. */
#include "iochain.h"

void ioc_init(ioc_chain *c, const void *in, void *out) {
    c->in = in;
    c->out = out;
}

const void *ioc_get_in(ioc_chain *c, size_t nbytes) {
    const void *p = c->in;
    c->in += nbytes;
    return p;
}

void *ioc_get_out(ioc_chain *c, size_t nbytes) {
    void *p = c->out;
    c->out += nbytes;
    return p;
}
