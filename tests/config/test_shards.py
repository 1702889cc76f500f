import pytest

from bot.config.shards import ShardPlan, shard_of

# Guild ids whose shard out of 2 is known: the shard is taken from the bits above the low 22.
ON_SHARD_0 = 4 << 22 | 12345
ON_SHARD_1 = 5 << 22 | 12345


def test_shard_of_is_discords_formula() -> None:
    assert shard_of(ON_SHARD_0, 2) == 0 and shard_of(ON_SHARD_1, 2) == 1
    assert shard_of(ON_SHARD_1, 1) == 0
    assert shard_of(7 << 22, 4) == 3
    # The low 22 bits (worker, process, increment) play no part.
    assert shard_of((6 << 22) | 0x3FFFFF, 4) == 2


def test_shard_of_refuses_no_shards() -> None:
    with pytest.raises(ValueError, match="shard_count"):
        shard_of(ON_SHARD_0, 0)


def test_automatic_and_all_shard_plans_own_every_guild() -> None:
    for plan in (ShardPlan(), ShardPlan(2), ShardPlan(2, (1, 0))):
        assert plan.owns_guild(ON_SHARD_0) and plan.owns_guild(ON_SHARD_1)
        assert plan.runs_every_shard and plan.syncs_commands


def test_a_plan_with_some_shards_owns_only_their_guilds() -> None:
    first, second = ShardPlan(2, (0,)), ShardPlan(2, (1,))
    assert first.owns_guild(ON_SHARD_0) and not first.owns_guild(ON_SHARD_1)
    assert second.owns_guild(ON_SHARD_1) and not second.owns_guild(ON_SHARD_0)
    assert not first.runs_every_shard and not second.runs_every_shard


def test_only_the_process_with_shard_0_syncs_commands() -> None:
    assert ShardPlan(4, (0, 1)).syncs_commands
    assert not ShardPlan(4, (2, 3)).syncs_commands


@pytest.mark.parametrize(("count", "ids"), [(None, (0,)), (0, None), (2, (2,)), (2, (0, 0)), (2, ()), (2, (-1,))])
def test_impossible_plans_are_refused(count: int | None, ids: tuple[int, ...] | None) -> None:
    with pytest.raises(ValueError):
        ShardPlan(count, ids)


def test_descriptions_name_the_shards() -> None:
    assert ShardPlan().describe().startswith("automatic")
    assert ShardPlan(2).describe() == "all 2 shards in this process"
    assert ShardPlan(4, (2, 3)).describe() == "shards 2, 3 of 4"
    assert ShardPlan(4, (1,)).describe() == "shard 1 of 4"


def test_a_plan_is_named_in_the_database_and_read_back() -> None:
    for plan, token in ((ShardPlan(), "*"), (ShardPlan(4), "*"), (ShardPlan(2, (1, 0)), "*"),
                        (ShardPlan(4, (3, 1)), "4:1,3")):  # fmt: skip
        assert plan.token == token
        assert ShardPlan.from_token(token).token == token
    for damaged in ("", "4", "4:", "x:1", "2:5"):
        with pytest.raises(ValueError):
            ShardPlan.from_token(damaged)


def test_two_plans_share_a_server_when_some_server_reaches_both() -> None:
    assert ShardPlan(4, (0, 1)).shares_a_server_with(ShardPlan(4, (1, 2)))
    assert not ShardPlan(4, (0, 1)).shares_a_server_with(ShardPlan(4, (2, 3)))
    assert ShardPlan().shares_a_server_with(ShardPlan(4, (2,))), "every shard meets any"
    assert ShardPlan(4, (2,)).shares_a_server_with(ShardPlan(2))
    # Counted differently: x % 2 == 0 and x % 4 == 1 never hold together; x % 2 == 1 and x % 4 == 3 do (x = 3).
    assert not ShardPlan(2, (0,)).shares_a_server_with(ShardPlan(4, (1, 3)))
    assert ShardPlan(2, (1,)).shares_a_server_with(ShardPlan(4, (3,)))
    # The rule against the servers themselves, every x over both counts' cycle.
    plans = [ShardPlan(2, (0,)), ShardPlan(4, (1, 3)), ShardPlan(3, (1,)), ShardPlan(6, (4,)), ShardPlan(6, (0, 5))]
    for one in plans:
        for other in plans:
            both = any(one.owns_guild(x << 22) and other.owns_guild(x << 22) for x in range(24))
            assert one.shares_a_server_with(other) == both, (one, other)
