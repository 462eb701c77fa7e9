/*
 * magi_aot/text.h - terminal-safe text: the one escaper for strings that
 * come from a file (node names, targets, keys, paths, tags) when the
 * library or the CLI shows them as text: reports, tables, warnings and
 * every error message (magi_last_error() is escaped when it is recorded).
 *
 * Rule: these bytes are written as \xNN (two lower-case hex digits), one
 * escape per byte, and everything else is copied unchanged:
 *   - C0 controls 0x00-0x1f (tab, newline and carriage return included:
 *     a name never starts a new line or moves the cursor) and DEL 0x7f;
 *   - the C1 controls U+0080..U+009F (both bytes of their UTF-8 form:
 *     U+009B is CSI on many terminals);
 *   - the text-direction overrides U+202A..U+202E and U+2066..U+2069
 *     (they reorder what is shown after them);
 *   - every byte that is not part of well-formed UTF-8 (a stray
 *     continuation byte, a truncated sequence, an overlong form, a
 *     surrogate, past U+10FFFF), e.g. a lone 0x9b.
 * A backslash is not escaped, so the escaped text contains nothing the
 * rule would escape again: escaping is idempotent (an error message that
 * carries an earlier one is not escaped twice). The price: a name that
 * holds the four characters "\x1b" reads the same as one that holds ESC;
 * the JSON outputs (--json, dump) carry the exact string.
 *
 * Thread safety: pure functions.
 */
#ifndef MAGI_AOT_TEXT_H
#define MAGI_AOT_TEXT_H

#include "common.h"
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Write the escaped form of `s` (NULL: "") into dst, like snprintf: at
 * most cap - 1 bytes and a NUL (nothing when cap is 0 or dst is NULL), never cutting an
 * escape or a UTF-8 sequence in two. Returns the length of the whole
 * escaped text (not counting the NUL); >= cap means it was cut. */
MAGI_API size_t magi_text_escape(char *dst, size_t cap, const char *s);

/* 1 when `s` (NULL: "") needs no escape, else 0. */
MAGI_API int magi_text_is_safe(const char *s);

/* For printf("%s"): `s` itself when it needs no escape (NULL: ""), else
 * its escaped form in buf (cap bytes; when it does not fit, cut at a
 * character boundary and ended with "..."). Never NULL; borrowed from s
 * or buf. */
MAGI_API const char *magi_text_safe(char *buf, size_t cap, const char *s);

#ifndef __cplusplus
/* printf("%s", MAGI_TEXT(name)): magi_text_safe with a buffer that lives
 * until the end of the enclosing block (a C compound literal). */
#define MAGI_TEXT(s) magi_text_safe((char[512]){0}, 512, (s))
#endif

/* Write the escaped form of `s` (NULL: nothing) to f. 0, or EOF on a
 * write error or a NULL f. */
MAGI_API int magi_text_fputs(FILE *f, const char *s);

/* Write `s` as a JSON string literal (NULL: null) to f, the one rule of
 * every JSON output of the library and the CLI: the usual short escapes,
 * \u00XX for the other C0 controls, DEL and the C1 controls, \u2028,
 * \u2029 and the direction overrides escaped too (all exact: the JSON
 * reads back as the same string, and shows no control sequence on a
 * terminal); ill-formed UTF-8 cannot be carried by JSON: each maximal
 * ill-formed subsequence is written as one U+FFFD (\ufffd), as Python
 * decodes with errors="replace". Returns the number of U+FFFD so written
 * (0: the literal is exact), or -1 on a write error or a NULL f. */
MAGI_API long magi_text_fput_json(FILE *f, const char *s);

#ifdef __cplusplus
}
#endif
#endif
