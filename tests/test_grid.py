from whichshot.grid import expand_jobs, job_by_id


def _config(**protocol):
    return {
        "engines": {"e1": {}},
        "models": {"m1": {}, "m2": {}},
        "prompts": {"lengths": [128, 512]},
        "protocol": {"cold_processes": 3, "warm_shots": 6, "rests_s": [0, 3], "repeats": 2, **protocol},
    }


def test_grid_is_the_full_product():
    jobs = expand_jobs(_config())
    # 1 engine x 2 models x 2 lengths x (cold + 2 warm rests) x 2 repeats
    assert len(jobs) == 1 * 2 * 2 * 3 * 2
    assert len({j.job_id for j in jobs}) == len(jobs)


def test_cold_and_warm_series_shapes():
    jobs = expand_jobs(_config(repeats=1))
    cold = job_by_id(_config(repeats=1), "e1.m1.p128.cold.rep1")
    warm = job_by_id(_config(repeats=1), "e1.m1.p128.warm-rest3s.rep1")
    assert cold.series_length == 3 and all(cold.fresh_process_before(i) for i in (1, 2, 3))
    assert warm.series_length == 6 and warm.rest_s == 3.0
    assert warm.fresh_process_before(1) and not warm.fresh_process_before(2)
    assert {j.protocol for j in jobs} == {"cold", "warm"}


def test_protocol_switched_off_drops_its_jobs():
    assert all(j.protocol == "warm" for j in expand_jobs(_config(cold_processes=0)))
