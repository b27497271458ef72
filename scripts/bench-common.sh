# Shared by compare-builds.sh and speed-matrix.sh (sourced, not run): the
# shapes and sizes they measure, and their helpers.
SHAPES="${SHAPES:-smollm2-135m 1b 8b}"
P="${P:-512}"
N="${N:-128}"

# The value of JSON field $1 in file $2 (bench --json's flat numbers).
field() { grep -oE "\"$1\": [^,}]*" "$2" | head -n 1 | sed 's/.*: //'; }

# Writes each of SHAPES as a synthetic model $2/SHAPE.gguf, with the
# `synthetic` binary of the build in directory $1.
write_shapes() {
    mkdir -p "$2"
    for shape in $SHAPES; do
        "$1/synthetic" "$shape" "$2/$shape.gguf" > /dev/null
    done
}
