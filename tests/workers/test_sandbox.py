from workers.fingerprint import harness_hash
from workers.sandbox import scrub_env


def test_scrub_env_drops_secrets():
    env = {
        "PATH": "/bin",
        "AWS_SECRET_ACCESS_KEY": "x",
        "DATABASE_URL": "pg://",
        "MY_TOKEN": "t",
        "REDIS_URL": "redis://",
        "DB_PASSWORD": "p",
        "HOME": "/root",
    }
    assert scrub_env(env) == {"PATH": "/bin", "HOME": "/root"}


def test_harness_hash_is_stable_hex():
    assert harness_hash() == harness_hash()
    assert len(harness_hash()) == 64
