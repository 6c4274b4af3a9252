/* Byte-pair merging of one piece, as tiktoken does it.
 *
 * A piece that is itself a token is one rank. Otherwise the piece starts as
 * single bytes and, repeatedly, the adjacent pair whose concatenation has the
 * lowest rank is merged (the leftmost on a tie), until no adjacent pair is a
 * token. Short pieces use a quadratic scan over a stack array (what tiktoken
 * does, and fastest for them); long pieces (a 100 kB line without a split
 * point) use a heap keyed by (rank, position), which picks the very same pair
 * at every step, so the result is identical and the cost O(n log n). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/bpe.h"
#include "tokenizer/bpe_internal.h"

#define NO_RANK UINT32_MAX

uint32_t llmq_bpe_size(const struct llmq_bpe_vocab *v)
{
    return v->n_tokens;
}

int64_t llmq_bpe_rank(const struct llmq_bpe_vocab *v, const unsigned char *b, size_t len)
{
    uint64_t h = llmq_bpe_hash(b, len);
    uint64_t i = h & v->mask;
    uint64_t tag = h & 0xFFFFFFFF00000000ull;
    for (;;) {
        uint64_t e = v->table[i];
        if (e == 0)
            return -1;
        if ((e & 0xFFFFFFFF00000000ull) == tag) {
            uint32_t r = (uint32_t)(e & 0xFFFFFFFFu) - 1;
            if (v->off[r + 1] - v->off[r] == len && memcmp(v->pool + v->off[r], b, len) == 0)
                return r;
        }
        i = (i + 1) & v->mask;
    }
}

const unsigned char *llmq_bpe_token_bytes(const struct llmq_bpe_vocab *v, uint32_t rank,
                                          size_t *len)
{
    if (rank >= v->n_tokens)
        return NULL;
    *len = v->off[rank + 1] - v->off[rank];
    return v->pool + v->off[rank];
}

static uint32_t rank_or_none(const struct llmq_bpe_vocab *v, const unsigned char *b, size_t len)
{
    int64_t r = llmq_bpe_rank(v, b, len);
    return r < 0 ? NO_RANK : (uint32_t)r;
}

static enum llmq_rc emit(struct llmq_bpe_out *out, uint32_t rank)
{
    if (out->want_ids) {
        if (out->n == out->cap) {
            size_t cap = out->cap ? out->cap * 2 : 64;
            uint32_t *ids = realloc(out->ids, cap * sizeof(uint32_t));
            if (ids == NULL)
                return LLMQ_ENOMEM;
            out->ids = ids;
            out->cap = cap;
        }
        out->ids[out->n] = rank;
    }
    out->n++;
    return LLMQ_OK;
}

/* The quadratic merge for len <= small_max (<= LLMQ_BPE_SMALL_MAX). */
static enum llmq_rc merge_small(const struct llmq_bpe_vocab *v, const unsigned char *p, size_t len,
                                struct llmq_bpe_out *out)
{
    uint32_t start[LLMQ_BPE_SMALL_MAX + 1];
    uint32_t pair[LLMQ_BPE_SMALL_MAX]; /* pair[i]: rank of parts i and i+1 merged */
    size_t m = len;                    /* parts; start[m] == len */
    for (size_t i = 0; i <= len; i++)
        start[i] = (uint32_t)i;
    for (size_t i = 0; i + 1 < m; i++)
        pair[i] = rank_or_none(v, p + i, 2);
    for (;;) {
        size_t best = 0;
        uint32_t best_rank = NO_RANK;
        for (size_t i = 0; i + 1 < m; i++) {
            if (pair[i] < best_rank) {
                best_rank = pair[i];
                best = i;
            }
        }
        if (best_rank == NO_RANK)
            break;
        memmove(&start[best + 1], &start[best + 2], (m - best - 1) * sizeof(start[0]));
        if (best + 3 < m)
            memmove(&pair[best + 1], &pair[best + 2], (m - best - 3) * sizeof(pair[0]));
        m--;
        if (best + 1 < m)
            pair[best] = rank_or_none(v, p + start[best], start[best + 2] - start[best]);
        if (best > 0) {
            uint32_t from = start[best - 1];
            pair[best - 1] = rank_or_none(v, p + from, start[best + 1] - from);
        }
    }
    for (size_t i = 0; i < m; i++) {
        uint32_t r = rank_or_none(v, p + start[i], start[i + 1] - start[i]);
        if (emit(out, r) != LLMQ_OK)
            return LLMQ_ENOMEM;
    }
    return LLMQ_OK;
}

struct heap_entry {
    uint32_t rank;
    uint32_t pos;  /* start byte of the left part: the tie-break */
    uint32_t node; /* the left part */
    uint32_t ver;  /* the left part's version when pushed */
};

struct heap {
    struct heap_entry *e;
    size_t n;
};

static int entry_less(const struct heap_entry *a, const struct heap_entry *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(struct heap *h, struct heap_entry x)
{
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!entry_less(&x, &h->e[parent]))
            break;
        h->e[i] = h->e[parent];
        i = parent;
    }
    h->e[i] = x;
}

static struct heap_entry heap_pop(struct heap *h)
{
    struct heap_entry top = h->e[0], last = h->e[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && entry_less(&h->e[c + 1], &h->e[c]))
            c++;
        if (!entry_less(&h->e[c], &last))
            break;
        h->e[i] = h->e[c];
        i = c;
    }
    if (h->n > 0)
        h->e[i] = last;
    return top;
}

/* Parts of the long merge: a doubly linked list over the piece's bytes. */
struct parts {
    uint32_t *next, *prev, *ver; /* next == len: none; prev == UINT32_MAX: none */
    unsigned char *dead;
    uint32_t len;
};

/* Pushes the pair (i, next of i) if it is a token. Node ids are start offsets. */
static void push_pair(const struct llmq_bpe_vocab *v, const unsigned char *p, struct parts *pt,
                      struct heap *h, uint32_t i)
{
    uint32_t j = pt->next[i];
    if (j >= pt->len)
        return;
    uint32_t end = pt->next[j];
    uint32_t r = rank_or_none(v, p + i, end - i);
    if (r != NO_RANK)
        heap_push(h, (struct heap_entry){r, i, i, pt->ver[i]});
}

static enum llmq_rc merge_large(const struct llmq_bpe_vocab *v, const unsigned char *p, size_t len,
                                struct llmq_bpe_out *out)
{
    struct parts pt = {.len = (uint32_t)len};
    struct heap h = {0};
    enum llmq_rc rc = LLMQ_ENOMEM;
    pt.next = malloc(len * sizeof(uint32_t));
    pt.prev = malloc(len * sizeof(uint32_t));
    pt.ver = calloc(len, sizeof(uint32_t));
    pt.dead = calloc(len, 1);
    /* Each merge pushes at most two entries; the initial pairs are len - 1. */
    h.e = malloc(3 * len * sizeof(struct heap_entry));
    if (pt.next == NULL || pt.prev == NULL || pt.ver == NULL || pt.dead == NULL || h.e == NULL)
        goto done;
    for (uint32_t i = 0; i < len; i++) {
        pt.next[i] = i + 1;
        pt.prev[i] = i == 0 ? UINT32_MAX : i - 1;
    }
    for (uint32_t i = 0; i + 1 < len; i++)
        push_pair(v, p, &pt, &h, i);
    while (h.n > 0) {
        struct heap_entry e = heap_pop(&h);
        uint32_t i = e.node;
        if (pt.dead[i] || pt.ver[i] != e.ver)
            continue; /* a neighbour merged since this pair was pushed */
        uint32_t j = pt.next[i];
        pt.dead[j] = 1;
        pt.next[i] = pt.next[j];
        if (pt.next[j] < len)
            pt.prev[pt.next[j]] = i;
        pt.ver[i]++;
        push_pair(v, p, &pt, &h, i);
        if (pt.prev[i] != UINT32_MAX) {
            pt.ver[pt.prev[i]]++;
            push_pair(v, p, &pt, &h, pt.prev[i]);
        }
    }
    rc = LLMQ_OK;
    for (uint32_t i = 0; i < len && rc == LLMQ_OK; i = pt.next[i])
        rc = emit(out, rank_or_none(v, p + i, pt.next[i] - i));
done:
    free(pt.next);
    free(pt.prev);
    free(pt.ver);
    free(pt.dead);
    free(h.e);
    return rc;
}

enum llmq_rc llmq_bpe_encode_piece(const struct llmq_bpe_vocab *v, const unsigned char *piece,
                                   size_t len, size_t small_max, struct llmq_bpe_out *out)
{
    if (len == 1)
        return emit(out, v->byte_rank[piece[0]]);
    if (len >= UINT32_MAX)
        return LLMQ_ETOOBIG; /* offsets are 32-bit; no request comes near */
    int64_t whole = llmq_bpe_rank(v, piece, len);
    if (whole >= 0)
        return emit(out, (uint32_t)whole);
    if (small_max > LLMQ_BPE_SMALL_MAX)
        small_max = LLMQ_BPE_SMALL_MAX;
    if (len <= small_max)
        return merge_small(v, piece, len, out);
    return merge_large(v, piece, len, out);
}
