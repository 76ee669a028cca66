/* libFuzzer harness for the ClientHello parser (hello.c): the input as a connection's first bytes, read whole and
 * as the proxy reads a hello in two pieces (the first piece alone, then all of it). Every piece is copied into an
 * allocation of its own exact size, so that AddressSanitizer sees a read one byte past what was given.
 * Built and run by tests/unit/proxy/test_hello_fuzz.py:
 *   clang -fsanitize=fuzzer,address,undefined relay/fuzz_hello.c relay/hello.c */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hello.h"

static enum hello_verdict check(const uint8_t *data, size_t len, struct hello *h) {
    unsigned char *copy = malloc(len ? len : 1);
    if (copy == NULL)
        abort();
    if (len)
        memcpy(copy, data, len);
    enum hello_verdict verdict = hello_read(copy, len, h);
    free(copy);
    /* What the caller is told must hold together: a name within its buffer, a need beyond what was given. */
    if (verdict == HELLO_SNI && (h->name_len == 0 || h->name_len > HELLO_MAX_NAME_BYTES - 1 || h->name[h->name_len]))
        abort();
    if (verdict == HELLO_INCOMPLETE && h->needed <= len)
        abort();
    if (verdict == HELLO_MALFORMED && memchr(h->reason, '\0', sizeof h->reason) == NULL)
        abort();
    return verdict;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct hello whole, first;
    enum hello_verdict verdict = check(data, size, &whole);
    if (size < 2)
        return 0;
    /* The cut from the input itself, so that the fuzzer explores it. */
    size_t cut = 1 + (size_t)data[size - 1] * (size - 1) / 256;
    enum hello_verdict early = check(data, cut, &first);
    /* The proxy stops at the first verdict: it must not depend on where the bytes were cut. */
    if (early != HELLO_INCOMPLETE && early != verdict)
        abort();
    if (early == HELLO_SNI && strcmp(first.name, whole.name) != 0)
        abort();
    return 0;
}
