"""The root lane's aggregator (docs/scaling.md): what it collects for a round and the roots it
posts. `collector`: the signed messages of one round, validated where they enter."""
