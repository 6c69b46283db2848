# Sourced by the study scripts once they have a temporary directory $dir
# and are at the repository's root: $bin is $FEDSCHED if set, else a
# fedsched built from this checkout into $dir.
bin=${FEDSCHED:-}
if [ -z "$bin" ]; then
  go build -o "$dir/fedsched" ./cmd/fedsched
  bin=$dir/fedsched
fi
