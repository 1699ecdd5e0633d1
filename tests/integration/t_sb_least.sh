#!/usr/bin/env bash
# timeout: 120
# after-split-brain discard-least-changes: a split brain while both nodes are
# secondary is resolved without an operator. alpha wrote 1 MiB, beta 3 MiB: alpha's changes are dropped;
# the pair resyncs by itself, both backing files equal beta's copy from before the reconnect,
# and each node's split-brain hook ran with its volume, node, peer, policy and verdict.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/splitbrain.sh
. "$(dirname "$0")/splitbrain.sh"

sb_setup discard-least-changes 
sb_split alpha 1 3
sb_expect_winner beta
log "PASS: after-split-brain discard-least-changes kept beta's data on both nodes"
