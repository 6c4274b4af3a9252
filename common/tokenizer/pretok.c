/* Pre-tokenizer scanners for the cl100k_base and o200k_base split patterns.
 *
 * cl100k_base:
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,3}
 *   | ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 * o200k_base:
 *   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|...)?
 *   | [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|...)?
 *   | \p{N}{1,3} | ?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 *
 * Each alternative is tried in order, as a backtracking regex engine would
 * (first alternative that matches wins, not the longest); the comment on each
 * helper says which backtracking outcome it computes in closed form. Every
 * code point falls in some alternative, so a piece is never empty.
 *
 * Below, "U" is [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], "W" is
 * [\p{Ll}\p{Lm}\p{Lo}\p{M}], "X" is [^\s\p{L}\p{N}], and a "prefix" char is
 * [^\r\n\p{L}\p{N}]. */
#include "tokenizer/pretok.h"

#include <stdint.h>

#include "tokenizer/unicode.h"

#define UC_U (LLMQ_UC_LU | LLMQ_UC_LO | LLMQ_UC_M)
#define UC_W (LLMQ_UC_LL | LLMQ_UC_LO | LLMQ_UC_M)
#define UC_UW (LLMQ_UC_LO | LLMQ_UC_M) /* in both U and W */
#define UC_LN (LLMQ_UC_L | LLMQ_UC_N)

/* Class of the code point at pos; its end offset into *next and value into *cp. */
static inline unsigned cls_at(const unsigned char *s, size_t len, size_t pos, size_t *next,
                              uint32_t *cp)
{
    size_t n = llmq_utf8_next(s, len, pos, cp);
    *next = n;
    return llmq_unicode_class(*cp);
}

/* End of the longest run from pos of code points whose class has a bit of mask. */
static size_t run_any(const unsigned char *s, size_t len, size_t pos, unsigned mask)
{
    size_t next;
    uint32_t cp;
    while (pos < len && (cls_at(s, len, pos, &next, &cp) & mask) != 0)
        pos = next;
    return pos;
}

/* End of the longest run of X = [^\s\p{L}\p{N}] from pos. */
static size_t run_x(const unsigned char *s, size_t len, size_t pos)
{
    size_t next;
    uint32_t cp;
    while (pos < len && (cls_at(s, len, pos, &next, &cp) & (UC_LN | LLMQ_UC_WS)) == 0)
        pos = next;
    return pos;
}

static int is_prefix(uint32_t cp, unsigned cls)
{
    return cp != '\r' && cp != '\n' && (cls & UC_LN) == 0;
}

static inline unsigned char ascii_lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d) at pos: returns its end, or pos when absent.
 * Unicode simple case folding makes 's' also match U+017F LATIN SMALL LETTER
 * LONG S; no other letter of these has a non-ASCII fold. */
static size_t contraction(const unsigned char *s, size_t len, size_t pos)
{
    if (pos + 1 >= len || s[pos] != '\'')
        return pos;
    unsigned char a = ascii_lower(s[pos + 1]);
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return pos + 2;
    if (s[pos + 1] == 0xC5 && pos + 2 < len && s[pos + 2] == 0xBF)
        return pos + 3;
    if (pos + 2 < len) {
        unsigned char b = ascii_lower(s[pos + 2]);
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
            return pos + 3;
    }
    return pos;
}

/* U*W+ from start. U* first takes the longest U run [start, u); if the char at
 * u is in W the match is that W run. Otherwise U* gives back chars one by one
 * until W+ can start on one, i.e. on the last char of the run that is in both
 * U and W (Lm, Lo, M); the chars after it are Lu/Lt, so W+ takes just it.
 * Returns the end, or 0 when there is no match. */
static size_t upper_lower(const unsigned char *s, size_t len, size_t start)
{
    size_t pos = start, next, last_uw_end = 0;
    uint32_t cp;
    unsigned cls = 0;
    while (pos < len) {
        cls = cls_at(s, len, pos, &next, &cp);
        if ((cls & UC_U) == 0)
            break;
        if (cls & UC_UW)
            last_uw_end = next;
        pos = next;
    }
    if (pos < len && (cls & LLMQ_UC_LL))
        return run_any(s, len, pos, UC_W);
    return last_uw_end;
}

/* U+W* from start: the longest U run (it must not be empty), then the longest
 * W run. Returns the end, or 0 when there is no match. */
static size_t upper_run(const unsigned char *s, size_t len, size_t start)
{
    size_t u = run_any(s, len, start, UC_U);
    if (u == start)
        return 0;
    return run_any(s, len, u, UC_W);
}

/* \p{N}{1,3} */
static size_t numbers(const unsigned char *s, size_t len, size_t pos)
{
    size_t next;
    uint32_t cp;
    for (int i = 0; i < 3 && pos < len; i++) {
        if ((cls_at(s, len, pos, &next, &cp) & LLMQ_UC_N) == 0)
            break;
        pos = next;
    }
    return pos;
}

/* " ?X+" then [\r\n]* (or [\r\n/]* with slash set). The caller knows that
 * either s[pos] is ' ' followed by an X, or s[pos] starts an X. */
static size_t punct(const unsigned char *s, size_t len, size_t pos, int with_space, int slash)
{
    pos = run_x(s, len, with_space ? pos + 1 : pos);
    while (pos < len && (s[pos] == '\r' || s[pos] == '\n' || (slash && s[pos] == '/')))
        pos++;
    return pos;
}

/* The whitespace alternatives, for a piece starting on a whitespace char:
 * \s*[\r\n]+ ends after the last CR/LF of the whitespace run; else
 * \s+(?!\S) takes the run at the end of the text, or all of it but its last
 * char when that leaves at least one; else \s+ takes the run. */
static size_t whitespace(const unsigned char *s, size_t len, size_t pos)
{
    size_t next, last_start = pos, crlf_end = 0, nchars = 0;
    uint32_t cp;
    while (pos < len && (cls_at(s, len, pos, &next, &cp) & LLMQ_UC_WS)) {
        if (cp == '\r' || cp == '\n')
            crlf_end = next;
        last_start = pos;
        nchars++;
        pos = next;
    }
    if (crlf_end != 0)
        return crlf_end;
    if (pos == len || nchars < 2)
        return pos;
    return last_start;
}

/* Is the char at pos (if any) an X? */
static int x_at(const unsigned char *s, size_t len, size_t pos)
{
    size_t next;
    uint32_t cp;
    return pos < len && (cls_at(s, len, pos, &next, &cp) & (UC_LN | LLMQ_UC_WS)) == 0;
}

static size_t cl100k_next(const unsigned char *s, size_t len, size_t pos)
{
    size_t n0, n1;
    uint32_t c0, c1;
    unsigned cls0 = cls_at(s, len, pos, &n0, &c0);
    if (c0 == '\'') {
        size_t e = contraction(s, len, pos);
        if (e > pos)
            return e;
    }
    if (is_prefix(c0, cls0) && n0 < len && (cls_at(s, len, n0, &n1, &c1) & LLMQ_UC_L))
        return run_any(s, len, n1, LLMQ_UC_L);
    if (cls0 & LLMQ_UC_L)
        return run_any(s, len, n0, LLMQ_UC_L);
    if (cls0 & LLMQ_UC_N)
        return numbers(s, len, pos);
    if (c0 == ' ' && x_at(s, len, n0))
        return punct(s, len, pos, 1, 0);
    if ((cls0 & LLMQ_UC_WS) == 0)
        return punct(s, len, pos, 0, 0);
    return whitespace(s, len, pos);
}

static size_t o200k_next(const unsigned char *s, size_t len, size_t pos)
{
    size_t n0, e = 0;
    uint32_t c0;
    unsigned cls0 = cls_at(s, len, pos, &n0, &c0);
    int prefix = is_prefix(c0, cls0);
    /* Each letter alternative: with the optional prefix char first, then without. */
    if (prefix)
        e = upper_lower(s, len, n0);
    if (e == 0)
        e = upper_lower(s, len, pos);
    if (e == 0 && prefix)
        e = upper_run(s, len, n0);
    if (e == 0)
        e = upper_run(s, len, pos);
    if (e != 0)
        return contraction(s, len, e);
    if (cls0 & LLMQ_UC_N)
        return numbers(s, len, pos);
    if (c0 == ' ' && x_at(s, len, n0))
        return punct(s, len, pos, 1, 1);
    if ((cls0 & LLMQ_UC_WS) == 0)
        return punct(s, len, pos, 0, 1);
    return whitespace(s, len, pos);
}

size_t llmq_pretok_next(enum llmq_pretok_pattern pattern, const unsigned char *s, size_t len,
                        size_t pos)
{
    if (pattern == LLMQ_PRETOK_CL100K)
        return cl100k_next(s, len, pos);
    return o200k_next(s, len, pos);
}
