// Bytes stored one at a time into d, whose words neighbouring invocations
// also write (a block need not start or end on a word): a run's bytes are
// collected into their word and merged with atomics when the word or the
// run ends.
struct ByteRun {
    word: u32,
    mask: u32,
}

fn put_byte(run: ptr<function, ByteRun>, at: u32, byte: u32, last: bool) {
    let shift = (at & 3u) * 8u;
    (*run).word |= byte << shift;
    (*run).mask |= 0xffu << shift;
    if ((at & 3u) == 3u || last) {
        atomicAnd(&d[at >> 2u], ~(*run).mask);
        atomicOr(&d[at >> 2u], (*run).word);
        *run = ByteRun(0u, 0u);
    }
}
