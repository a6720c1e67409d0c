#!/usr/bin/env python3
"""test/fuzz/make_seeds.py: writes the seed corpus under test/fuzz/corpus/.

The committed seeds are this script's output (run it again after changing
it).  Signature seeds are requests in signature_fuzz.c's layout, signed with
each provider's published example where there is one (Standard Webhooks'
test vector, GitHub's "Hello, World!", Slack's docs) and with Python's hmac
otherwise; then malformed, expired, tampered and rotated variants.
"""
import base64
import hashlib
import hmac
import os

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    d = os.path.join(TOP, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def request(first, secrets, headers, body):
    lines = [first, "\t".join(secrets)] + ["%s: %s" % h for h in headers]
    return ("\n".join(lines) + "\n\n").encode() + (body if isinstance(body, bytes) else body.encode())


def mac(key, msg):
    return hmac.new(key, msg, hashlib.sha256).digest()


def signature_seeds():
    # Standard Webhooks' published test vector.
    sw_secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    sw_key = base64.b64decode(sw_secret[6:])
    sw_body = '{"test": 2432232314}'
    sw_id, sw_ts = "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330"
    sw_sig = base64.b64encode(mac(sw_key, ("%s.%s.%s" % (sw_id, sw_ts, sw_body)).encode())).decode()
    assert sw_sig == "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    sw = [("webhook-id", sw_id), ("webhook-timestamp", sw_ts), ("webhook-signature", "v1," + sw_sig)]
    write("signature", "standard_vector", request("standard-webhooks 1614265330 300", [sw_secret], sw, sw_body))
    write("signature", "svix_vector", request("svix 1614265330 300", [sw_secret],
                                              [("Svix-Id", sw_id), ("Svix-Timestamp", sw_ts),
                                               ("Svix-Signature", "v1,bm9wZQ== v1," + sw_sig)], sw_body))
    write("signature", "standard_rotated", request("Standard-Webhooks 1614265400 300",
                                                   ["whsec_dGhlIG9sZCBrZXkgdGhhdCB3YXMgcm90YXRlZA==", sw_secret],
                                                   sw, sw_body))
    write("signature", "standard_expired", request("standard-webhooks 1614265931 600", [sw_secret], sw, sw_body))
    write("signature", "standard_malformed", request("standard-webhooks 1614265330 300", [sw_secret],
                                                     [("webhook-id", sw_id), ("webhook-timestamp", "16142653x0"),
                                                      ("webhook-signature", "v1" + sw_sig)], sw_body))

    # Stripe: key is the secret's bytes; t.body; several v1, v0 ignored.
    st_secret, st_ts = "whsec_7f1c9a4e2b5d8f3a6c0e9b2d4f7a1c3e", "1700000000"
    st_body = '{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","type":"customer.created"}'
    st_sig = mac(st_secret.encode(), ("%s.%s" % (st_ts, st_body)).encode()).hex()
    write("signature", "stripe_valid", request("stripe 1700000100 300", [st_secret],
                                               [("Stripe-Signature", "t=%s,v1=%s,v0=%s" % (st_ts, st_sig, "ab" * 32))],
                                               st_body))
    write("signature", "stripe_two_v1", request("STRIPE 1700000000 300", ["old_secret", st_secret],
                                                [("stripe-signature", "t=%s, v1=%s, v1=%s" % (st_ts, "0" * 64, st_sig))],
                                                st_body))
    write("signature", "stripe_no_t", request("stripe", [st_secret], [("Stripe-Signature", "v1=" + st_sig)], st_body))
    write("signature", "stripe_tampered", request("stripe 1700000000 300", [st_secret],
                                                  [("Stripe-Signature", "t=%s,v1=%s" % (st_ts, st_sig))],
                                                  st_body.replace("customer", "invoice")))

    # GitHub's documented example.
    gh_secret, gh_body = "It's a Secret to Everybody", "Hello, World!"
    gh_sig = mac(gh_secret.encode(), gh_body.encode()).hex()
    assert gh_sig == "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    write("signature", "github_example", request("github", [gh_secret],
                                                 [("X-GitHub-Event", "push"),
                                                  ("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
                                                  ("X-Hub-Signature-256", "sha256=" + gh_sig)], gh_body))
    write("signature", "github_sha1_only", request("github", [gh_secret],
                                                   [("X-Hub-Signature", "sha1=01dc10d0c83e72ed246219cdd91669667fe2ca59")],
                                                   gh_body))

    # Shopify: base64 of the body's MAC.
    sh_secret = "hush"
    sh_body = '{"id":820982911946154508,"email":"jon@example.com","closed_at":null}'
    sh_sig = base64.b64encode(mac(sh_secret.encode(), sh_body.encode())).decode()
    write("signature", "shopify_valid", request("shopify", [sh_secret],
                                                [("X-Shopify-Topic", "orders/create"),
                                                 ("X-Shopify-Hmac-Sha256", sh_sig),
                                                 ("X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043")],
                                                sh_body))
    write("signature", "shopify_unpadded", request("shopify", [sh_secret],
                                                   [("x-shopify-hmac-sha256", sh_sig.rstrip("="))], sh_body))

    # Slack's documented example.
    sl_secret, sl_ts = "8f742231b10e8888abcd99yyyzzz85a5", "1531420618"
    sl_body = ("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
               "&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
               "&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
               "&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")
    sl_sig = mac(sl_secret.encode(), ("v0:%s:%s" % (sl_ts, sl_body)).encode()).hex()
    assert sl_sig == "a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
    write("signature", "slack_example", request("slack 1531420618 300", [sl_secret],
                                                [("X-Slack-Request-Timestamp", sl_ts),
                                                 ("X-Slack-Signature", "v0=" + sl_sig)], sl_body))
    write("signature", "slack_old", request("slack 1531421000 300", [sl_secret],
                                            [("X-Slack-Request-Timestamp", sl_ts),
                                             ("X-Slack-Signature", "v0=" + sl_sig)], sl_body))
    write("signature", "no_headers", request("unknown", ["s"], [], ""))
    write("signature", "empty_secret", request("github", [""], [("X-Hub-Signature-256", "sha256=")], "x"))


def url_seeds():
    # An id alone (no NUL): the fixed template; else TEMPLATE\0ID.
    for name, data in [("plain", b"post-42"), ("dot", b"."), ("dotdot", b".."), ("dots3", b"..."),
                       ("reserved", b"a/b?c#d%2F e"), ("utf8", "caf\u00e9-\u65e5\u672c".encode()),
                       ("unreserved", b"AZaz09-._~"),
                       ("two", b"https://api.example.com/{external_id}/items/{external_id}?q=1\0o/1"),
                       ("none", b"https://api.example.com/static\0x"),
                       ("adjacent", b"{external_id}{external_id}{external_id\0..%"),
                       ("empty_id", b"https://h/{external_id}\0")]:
        write("url_template", name, data)


def retry_after_seeds():
    for name, data in [("seconds", "120"), ("zero", "0"), ("big", "99999999999999999999999"),
                       ("leading_zeros", "0000086401"), ("imf", "Wed, 21 Oct 2015 07:28:00 GMT"),
                       ("rfc850", "Wednesday, 21-Oct-15 07:28:00 GMT"), ("asctime", "Wed Oct 21 07:28:00 2015"),
                       ("future", "Thu, 01 Jan 2026 00:02:00 GMT"), ("negative", "-5"), ("space", " 120"),
                       ("fraction", "1.5"), ("garbage", "soon")]:
        write("retry_after", name, data)


signature_seeds()
url_seeds()
retry_after_seeds()
