#!/usr/bin/env bash
# timeout: 120
# after-split-brain discard-younger-primary: a split brain while both nodes are
# secondary is resolved without an operator. alpha promoted first, beta 0.2 s later (and beta wrote more): beta's changes are dropped;
# the pair resyncs by itself, both backing files equal alpha's copy from before the reconnect,
# and each node's split-brain hook ran with its volume, node, peer, policy and verdict.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/splitbrain.sh
. "$(dirname "$0")/splitbrain.sh"

sb_setup discard-younger-primary 
sb_split alpha 1 3
sb_expect_winner alpha
log "PASS: after-split-brain discard-younger-primary kept alpha's data on both nodes"
