#!/usr/bin/env bash
# timeout: 120
# after-split-brain discard-zero-changes: a split brain while both nodes are
# secondary is resolved without an operator. beta wrote nothing, alpha 1 MiB: beta's (empty) changes are dropped;
# the pair resyncs by itself, both backing files equal alpha's copy from before the reconnect,
# and each node's split-brain hook ran with its volume, node, peer, policy and verdict.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/splitbrain.sh
. "$(dirname "$0")/splitbrain.sh"

sb_setup discard-zero-changes 
sb_split alpha 1 0
sb_expect_winner alpha
log "PASS: after-split-brain discard-zero-changes kept alpha's data on both nodes"
