// Stores the eight values of decoded unit `u` through the kernel's
// `put(k, at, v)`, k being the value's element of its row (x_elem) and
// `at` whatever the kernel needs to place it. Constant indices keep the
// unit in registers.
fn put_unit(u: u32, w: Unit, at: vec4<u32>) {
    put(x_elem(u, 0u), at, w[0].x);
    put(x_elem(u, 1u), at, w[0].y);
    put(x_elem(u, 2u), at, w[0].z);
    put(x_elem(u, 3u), at, w[0].w);
    put(x_elem(u, 4u), at, w[1].x);
    put(x_elem(u, 5u), at, w[1].y);
    put(x_elem(u, 6u), at, w[1].z);
    put(x_elem(u, 7u), at, w[1].w);
}
