"""A planted-secrets corpus for measuring the scrubber: recall on secrets of many kinds set in
realistic code, logs, configs and shell sessions, and false positives on ordinary code with
look-alikes (hashes, ids, versions, tokenizer markers, code that *handles* passwords).

Every value is generated here from a seeded RNG: random, never a real credential. The clean
side is the running interpreter's own standard library (a fixed list of modules that handle
passwords, tokens, URLs and hashes) plus generated look-alike lines.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import sysconfig
import uuid
from dataclasses import dataclass
from pathlib import Path

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
LOWER_DIGITS = string.ascii_lowercase + string.digits


@dataclass(frozen=True, slots=True)
class Planted:
    kind: str
    secret: str
    """The exact text that must not survive the scrub."""
    text: str
    """The secret in its context (a config, a log, a shell session, code)."""


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def tok(self, n: int, alphabet: str = ALNUM) -> str:
        # Like a real key: letters and digits both (when the alphabet has both).
        need_both = any(c.isdigit() for c in alphabet) and any(c.isalpha() for c in alphabet)
        while True:
            value = "".join(self.rng.choice(alphabet) for _ in range(n))
            if not need_both or (any(c.isdigit() for c in value)
                                 and any(c.isalpha() for c in value)):
                return value

    def pick(self, *options: str) -> str:
        return self.rng.choice(options)

    def user(self) -> str:
        return self.pick("alice", "bob", "jdoe", "maria.k", "wchen", "dev", "sam_r", "ops")


def _jwt(g: _Gen) -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    head = part({"alg": g.pick("HS256", "RS256"), "typ": "JWT"})
    return f"{head}.{part({'sub': g.tok(10), 'iat': g.rng.randint(1, 2**31)})}." \
           f"{g.tok(43, ALNUM + '-_')}"


def _pem(g: _Gen) -> str:
    kind = g.pick("RSA ", "EC ", "OPENSSH ", "", "DSA ")
    body = "\n".join(g.tok(64, ALNUM + "+/") for _ in range(g.rng.randint(3, 8)))
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"


def _secrets(g: _Gen) -> list[tuple[str, str]]:
    """One (kind, value) of every kind."""
    user = g.user()
    return [
        ("aws_access_key", g.pick("AKIA", "ASIA") + g.tok(16, UPPER_DIGITS)),
        ("aws_secret_key", g.tok(40, ALNUM + "/+")),
        ("github_token", g.pick("ghp_", "gho_", "ghs_") + g.tok(36)),
        ("gitlab_token", g.pick("glpat-", "gldt-", "glrt-") + g.tok(20, ALNUM + "_-")),
        ("anthropic_key", "sk-ant-api03-" + g.tok(80, ALNUM + "_-")),
        ("openai_key", g.pick("sk-", "sk-proj-") + g.tok(48)),
        ("slack_token", f"xox{g.pick('b', 'p', 'a')}-{g.rng.randint(10**10, 10**11)}-"
                        f"{g.tok(24)}"),
        ("private_key", _pem(g)),
        ("jwt", _jwt(g)),
        ("url_credentials", f"{user}:{g.tok(14)}"),
        ("email", f"{user}@{g.pick('gmail.com', 'acme-corp.io', 'mail.uni.edu', 'corp.net')}"),
        ("ipv4", f"{g.pick('10', '172', '192', '34', '52')}.{g.rng.randint(1, 254)}."
                 f"{g.rng.randint(1, 254)}.{g.rng.randint(1, 254)}"),
        ("ipv6", f"2600:1f18:{g.tok(4, '0123456789abcdef')}::{g.tok(4, '0123456789abcdef')}:"
                 f"{g.tok(4, '0123456789abcdef')}"),
        ("high_entropy_secret", g.tok(32, ALNUM + "-_")),
        ("bearer_token", g.tok(40, ALNUM + "._-")),
        ("huggingface_token", "hf_" + g.tok(34)),
        ("google_api_key", "AIza" + g.tok(35, ALNUM + "_-")),
        ("stripe_key", g.pick("sk_live_", "rk_live_", "sk_test_") + g.tok(24)),
        ("npm_token", "npm_" + g.tok(36)),
        ("pypi_token", "pypi-AgEIcHlwaS5vcmc" + g.tok(70, ALNUM + "_-")),
        ("password", g.pick("hunter2", "Tr0ub4dor&3", "s3cr3t!", "P@ssw0rd2024", "letmein99",
                            "correct-horse-7", "qwerty123", "Zx!9vB#2")),
        ("home_path", g.pick(f"/home/{user}", f"/Users/{user}")),
        ("sendgrid_key", f"SG.{g.tok(22, ALNUM + '_-')}.{g.tok(43, ALNUM + '_-')}"),
        ("twilio_key", g.pick("AC", "SK") + g.tok(32, LOWER_DIGITS)),
        ("telegram_token", f"{g.rng.randint(10**8, 10**9)}:{g.tok(35, ALNUM + '_-')}"),
        ("mailchimp_key", f"{g.tok(32, LOWER_DIGITS)}-us{g.rng.randint(1, 20)}"),
        ("azure_storage_key", g.tok(86, ALNUM + "+/") + "=="),
    ]


def _context(g: _Gen, kind: str, value: str) -> str:
    """The value set in one of several realistic surroundings for its kind."""
    u = g.user()
    c = {
        "aws_access_key": [f"$ env | grep AWS\nAWS_ACCESS_KEY_ID={value}\nAWS_REGION=us-east-1",
                           f'{{"Credentials": {{"AccessKeyId": "{value}"}}}}',
                           f"boto3.client('s3', aws_access_key_id='{value}')"],
        "aws_secret_key": [f"[default]\naws_secret_access_key = {value}\n",
                           f'export AWS_SECRET_ACCESS_KEY="{value}"',
                           f"s3 = boto3.client('s3', 'AKIA{g.tok(16, UPPER_DIGITS)}', '{value}')",
                           f"aws configure set default.region eu-west-1\n# key: {value}"],
        "github_token": [f"GH_TOKEN={value} gh pr list",
                         f"git remote set-url origin https://{value}@github.com/a/b.git",
                         f"headers = {{'Authorization': 'token {value}'}}"],
        "gitlab_token": [f"PRIVATE-TOKEN: {value}", f"export CI_JOB_TOKEN={value}"],
        "anthropic_key": [f"client = Anthropic(api_key=\"{value}\")",
                          f"The user pasted their key: {value} — please rotate it."],
        "openai_key": [f'client = OpenAI(api_key="{value}")', f"OPENAI_API_KEY={value}"],
        "slack_token": [f"SLACK_BOT_TOKEN: {value}", f"slack_sdk.WebClient(token='{value}')"],
        "private_key": [f"$ cat ~/.ssh/id_rsa\n{value}\n$ ls", f'KEY = """{value}"""'],
        "jwt": [f"> Cookie: session={value}\n< HTTP/1.1 200 OK",
                f'resp = requests.get(url, headers={{"X-Session": "{value}"}})'],
        "url_credentials": [
            f"sqlalchemy.exc.OperationalError: postgresql://{value}@db.internal:5432/app",
            f'DATABASE_URL = "mysql://{value}@10.0.0.1/prod"',
            f"pip install --index-url https://{value}@pypi.corp.net/simple pkg"],
        "email": [f"Author: {u} <{value}>\nDate: Mon Jan 1", f"git config user.email {value}",
                  f'"maintainer": "{value}",'],
        "ipv4": [f"PING {value} ({value}) 56(84) bytes of data.",
                 f"ssh deploy@{value} 'systemctl restart app'",
                 f"2026-01-02 10:00:01 INFO connected to {value}:5432"],
        "ipv6": [f"inet6 {value}/64 scope global", f"listen [{value}]:443 ssl;"],
        "high_entropy_secret": [f'client_secret = "{value}"\nDEBUG = False',
                                f"webhook_secret: {value}", f"API_KEY = '{value}'",
                                f'"access_key": "{value}",'],
        "bearer_token": [f"curl -H 'Authorization: Bearer {value}' https://api.x.io",
                         f"Authorization: Bearer {value}"],
        "huggingface_token": [f"HF_TOKEN={value} huggingface-cli login",
                              f"login(token='{value}')"],
        "google_api_key": [f"https://maps.googleapis.com/maps/api/geocode/json?key={value}",
                           f'GOOGLE_API_KEY="{value}"'],
        "stripe_key": [f"stripe.api_key = '{value}'", f"STRIPE_SECRET={value}"],
        "npm_token": [f"//registry.npmjs.org/:_authToken={value}", f"NPM_TOKEN={value} npm ci"],
        "pypi_token": [f"[pypi]\nusername = __token__\npassword = {value}",
                       f"twine upload -p {value} dist/*"],
        "password": [f"export DB_PASSWORD={value}", f"  password: \"{value}\"",
                     f'{{"username": "{u}", "password": "{value}"}}',
                     f'conn = "Server=db;User Id=sa;Password={value};"',
                     f"mysql -u root --password={value} app", f"MYSQL_ROOT_PASSWORD: {value}",
                     f"[database]\nuser = {u}\npassword = {value}\n",
                     f"PGPASSWORD={value} psql -h db -U app"],
        "home_path": [f"Traceback (most recent call last):\n  File \"{value}/proj/app.py\", "
                      "line 3, in <module>",
                      f"$ cd {value}/src && pytest -q", f"cwd: {value}/work/repo",
                      f"ERROR: could not open {value}/.config/tool.toml"],
        "sendgrid_key": [f"SENDGRID_API_KEY={value}", f"sg = SendGridAPIClient('{value}')"],
        "twilio_key": [f"client = Client('{value}', auth)", f"TWILIO_SID: {value}"],
        "telegram_token": [f"bot = telebot.TeleBot('{value}')", f"TELEGRAM_TOKEN={value}"],
        "mailchimp_key": [f"mc.set_config({{'api_key': '{value}'}})",
                          f"MAILCHIMP={value}"],
        "azure_storage_key": [
            f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={value};"
            "EndpointSuffix=core.windows.net"],
    }[kind]
    return g.pick(*c)


def planted(seed: int = 20261203, per_kind: int = 8) -> list[Planted]:
    """``per_kind`` values of each of the 27 kinds, each in a realistic surrounding."""
    g = _Gen(seed)
    out = []
    for _ in range(per_kind):
        for kind, value in _secrets(g):
            out.append(Planted(kind, value, _context(g, kind, value)))
    return out


# Modules that handle passwords, tokens, URLs, hashes and addresses: hard, ordinary code.
CLEAN_MODULES = ("smtplib.py", "ftplib.py", "netrc.py", "getpass.py", "imaplib.py",
                 "tokenize.py", "secrets.py", "hmac.py", "base64.py", "uuid.py",
                 "ipaddress.py", "urllib/request.py", "urllib/parse.py", "http/cookiejar.py",
                 "argparse.py", "shlex.py", "configparser.py")


def lookalikes(seed: int = 7, n: int = 60) -> list[str]:
    """Ordinary lines that resemble secrets: hashes, ids, versions, tokenizer markers, code
    that reads passwords, paths that are not anyone's home."""
    rng = random.Random(seed)
    out: list[str] = []
    for i in range(n):
        digest = hashlib.sha256(str(i).encode()).hexdigest()
        sha1 = hashlib.sha1(str(i).encode()).hexdigest()
        blob = base64.b64encode(rng.randbytes(30)).decode()
        out += [
            f"commit {sha1}",
            f'    "integrity": "sha512-{base64.b64encode(rng.randbytes(48)).decode()}",',
            f"docker pull python@sha256:{digest}",
            f"request_id = \"{uuid.UUID(int=rng.getrandbits(128))}\"",
            f"expected = {blob!r}  # base64 of the fixture bytes",
            f'version = "1.{i}.{rng.randint(0, 9)}.{rng.randint(0, 9)}"',
            "password = getpass.getpass('Password: ')",
            'api_key = os.environ["OPENAI_API_KEY"]',
            "SECRET_KEY = os.environ.get('DJANGO_SECRET_KEY')",
            "self.token = token",
            f"max_tokens={rng.choice([256, 512, 1024, 4096])},",
            'tokenizer.pad_token = "[PAD]"',
            'bos_token="<s>", eos_token="</s>", unk_token="<unk>",',
            "auth = HTTPBasicAuth(username, password)",
            'password_field = "password"',
            "def login(user: str, password: str) -> Session:",
            "token: str | None = None",
            f"cache_dir = \"/workspace/.cache/{sha1[:8]}\"",
            "sys.path.insert(0, '/usr/lib/python3/dist-packages')",
            f"assert checksum == \"{digest[:40]}\"",
            "url = f'https://{host}:{port}/api/v1/items'",
            "PASSWORD_MIN_LENGTH = 12",
            "if not token:\n    raise AuthError('missing token')",
            "export PATH=\"$HOME/.local/bin:$PATH\"",
            "os.path.expanduser('~/.config/app.toml')",
            f"Successfully installed requests-2.{i % 32}.0 urllib3-2.2.{i % 9}",
        ]
    return out


def clean_lines() -> list[str]:
    """The standard library modules above (their own text, read here) plus look-alikes."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    lines: list[str] = []
    for name in CLEAN_MODULES:
        path = stdlib / name
        if path.exists():
            lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    lines += [part for line in lookalikes() for part in line.splitlines()]
    return [line for line in lines if line.strip()]
