from durations import format_duration


def test_minutes_shown():
    assert format_duration(3661) == "1h1m1s"
    assert format_duration(90) == "1m30s"
    assert format_duration(86400 + 60) == "1d1m"


def test_round_trip_of_minutes():
    assert format_duration(600) == "10m"
