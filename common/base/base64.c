/* Base64 decoding; see base64.h. One constant table, built at compile
 * time: a lookup per byte is what keeps loading a 200k-line vocabulary fast. */
#include "base/base64.h"

/* 0: not base64; 1: skipped (padding, line breaks, spaces); v + 2: digit v. */
static const unsigned char digit_of[256] = {
    ['A'] = 2,  ['B'] = 3,  ['C'] = 4,  ['D'] = 5,  ['E'] = 6,  ['F'] = 7,  ['G'] = 8,  ['H'] = 9,
    ['I'] = 10, ['J'] = 11, ['K'] = 12, ['L'] = 13, ['M'] = 14, ['N'] = 15, ['O'] = 16, ['P'] = 17,
    ['Q'] = 18, ['R'] = 19, ['S'] = 20, ['T'] = 21, ['U'] = 22, ['V'] = 23, ['W'] = 24, ['X'] = 25,
    ['Y'] = 26, ['Z'] = 27, ['a'] = 28, ['b'] = 29, ['c'] = 30, ['d'] = 31, ['e'] = 32, ['f'] = 33,
    ['g'] = 34, ['h'] = 35, ['i'] = 36, ['j'] = 37, ['k'] = 38, ['l'] = 39, ['m'] = 40, ['n'] = 41,
    ['o'] = 42, ['p'] = 43, ['q'] = 44, ['r'] = 45, ['s'] = 46, ['t'] = 47, ['u'] = 48, ['v'] = 49,
    ['w'] = 50, ['x'] = 51, ['y'] = 52, ['z'] = 53, ['0'] = 54, ['1'] = 55, ['2'] = 56, ['3'] = 57,
    ['4'] = 58, ['5'] = 59, ['6'] = 60, ['7'] = 61, ['8'] = 62, ['9'] = 63, ['+'] = 64, ['-'] = 64,
    ['/'] = 65, ['_'] = 65, ['='] = 1,  ['\n'] = 1, ['\r'] = 1, [' '] = 1,
};

long llmq_base64_decode(const char *s, size_t n, unsigned char *out)
{
    unsigned acc = 0;
    int bits = 0;
    long o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned d = digit_of[(unsigned char)s[i]];
        if (d == 0)
            return -1;
        if (d == 1)
            continue;
        acc = (acc << 6) | (d - 2);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    return o;
}
