/* A fixed-size ring buffer of bytes, for a serial port driver. */
#include <stddef.h>
#include <string.h>

#define RING_SIZE 256

struct ring {
    unsigned char data[RING_SIZE];
    size_t head;
    size_t tail;
    size_t count;
};

void ring_init(struct ring *r)
{
    memset(r, 0, sizeof *r);
}

int ring_push(struct ring *r, unsigned char byte)
{
    if (r->count == RING_SIZE)
        return -1;
    r->data[r->head] = byte;
    r->head = (r->head + 1) % RING_SIZE;
    r->count++;
    return 0;
}

int ring_pop(struct ring *r, unsigned char *byte)
{
    if (r->count == 0)
        return -1;
    *byte = r->data[r->tail];
    r->tail = (r->tail + 1) % RING_SIZE;
    r->count--;
    return 0;
}

size_t ring_read(struct ring *r, unsigned char *out, size_t max)
{
    size_t n = 0;
    while (n < max && ring_pop(r, &out[n]) == 0)
        n++;
    return n;
}
