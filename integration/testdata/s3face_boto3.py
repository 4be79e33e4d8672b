"""Reads a dataset through Brand's S3 face with boto3, as an unchanged S3
program would, and checks it against the source tree it was packed from.

Run by integration/s3face_test.go:

    python3 s3face_boto3.py ENDPOINT ACCESS_KEY SECRET BUCKET SOURCE_DIR

It exits 0 after printing one JSON line of figures, or 1 with what failed.
"""

import json
import os
import sys
import time
import urllib.error
import urllib.request

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError


def client(endpoint, key, secret):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2, "mode": "standard"}),
    )


def error_of(fn):
    """The S3 error code and HTTP status fn fails with, or (None, 200)."""
    try:
        fn()
    except ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    return None, 200


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    endpoint, key, secret, bucket, src = sys.argv[1:6]
    s3 = client(endpoint, key, secret)
    files = {}
    for root, _, names in os.walk(src):
        for n in names:
            p = os.path.join(root, n)
            files[os.path.relpath(p, src).replace(os.sep, "/")] = p

    buckets = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    expect(bucket in buckets, f"list_buckets: {bucket} not in {buckets}")

    # Every object, in pages of 37: names, order and sizes from the index.
    listed, pages = [], 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, PaginationConfig={"PageSize": 37}):
        pages += 1
        listed.extend(page.get("Contents", []))
    names = [o["Key"] for o in listed]
    expect(names == sorted(names, key=lambda s: s.encode()), "listing is not in byte order")
    expect(set(names) == set(files), f"listed {len(names)} objects, source has {len(files)}; "
           f"missing {sorted(set(files) - set(names))[:5]}, extra {sorted(set(names) - set(files))[:5]}")
    expect(len(names) == len(files), "an object listed twice")
    for o in listed:
        expect(o["Size"] == os.path.getsize(files[o["Key"]]), f"{o['Key']}: listed size {o['Size']}")

    # One level of "directories", as a file browser lists them.
    top = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    prefixes = sorted(p["Prefix"] for p in top.get("CommonPrefixes", []))
    want = sorted({n.split("/", 1)[0] + "/" for n in files if "/" in n})
    expect(prefixes == want, f"common prefixes {prefixes} != {want}")
    # The v1 listing, which boto3's list_objects sends.
    v1 = s3.list_objects(Bucket=bucket, MaxKeys=5)
    expect([o["Key"] for o in v1["Contents"]] == names[:5] and v1["IsTruncated"], "list_objects (v1) first page")

    # HEAD and GET of every object, byte for byte.
    etags = {}
    for n in names:
        with open(files[n], "rb") as f:
            want = f.read()
        h = s3.head_object(Bucket=bucket, Key=n)
        expect(h["ContentLength"] == len(want), f"head {n}: length {h['ContentLength']} != {len(want)}")
        got = s3.get_object(Bucket=bucket, Key=n)
        body = got["Body"].read()
        expect(body == want, f"get {n}: {len(body)} bytes differ from the source's {len(want)}")
        expect(got["ETag"] == h["ETag"], f"{n}: GET and HEAD ETags differ")
        etags[n] = h["ETag"]

    n = max(names, key=lambda k: os.path.getsize(files[k]))
    with open(files[n], "rb") as f:
        want = f.read()
    size = len(want)
    # Ranges: 206 with the bytes asked for; past the end 416.
    r = s3.get_object(Bucket=bucket, Key=n, Range="bytes=1-10")
    expect(r["ResponseMetadata"]["HTTPStatusCode"] == 206, "range: not 206")
    expect(r["ContentRange"] == f"bytes 1-10/{size}", f"range: Content-Range {r['ContentRange']}")
    expect(r["Body"].read() == want[1:11], "range: wrong bytes")
    r = s3.get_object(Bucket=bucket, Key=n, Range="bytes=-7")
    expect(r["Body"].read() == want[-7:], "suffix range: wrong bytes")
    r = s3.get_object(Bucket=bucket, Key=n, Range=f"bytes={size - 3}-{size + 100}")
    expect(r["Body"].read() == want[-3:], "range past the end: not clamped")
    expect(error_of(lambda: s3.get_object(Bucket=bucket, Key=n, Range=f"bytes={size}-")) == ("InvalidRange", 416),
           "unsatisfiable range: not InvalidRange 416")

    # Conditional requests.
    code = error_of(lambda: s3.get_object(Bucket=bucket, Key=n, IfNoneMatch=etags[n]))
    expect(code == ("304", 304), f"If-None-Match of the ETag: {code}")
    code = error_of(lambda: s3.get_object(Bucket=bucket, Key=n, IfMatch='"0000000000000000"'))
    expect(code == ("PreconditionFailed", 412), f"If-Match of another ETag: {code}")
    expect(s3.get_object(Bucket=bucket, Key=n, IfMatch=etags[n])["Body"].read() == want, "If-Match of the ETag")
    code = error_of(lambda: s3.head_object(Bucket=bucket, Key=n, IfNoneMatch=etags[n]))
    expect(code == ("304", 304), f"HEAD If-None-Match: {code}")

    # Errors, as S3 words them.
    code = error_of(lambda: s3.get_object(Bucket=bucket, Key="no/such/key.jpg"))
    expect(code == ("NoSuchKey", 404), f"unknown key: {code}")
    code = error_of(lambda: s3.list_objects_v2(Bucket="no-such-bucket"))
    expect(code == ("NoSuchBucket", 404), f"unknown bucket: {code}")
    bad = client(endpoint, key, secret + "x")
    code = error_of(lambda: bad.get_object(Bucket=bucket, Key=n))
    expect(code == ("SignatureDoesNotMatch", 403), f"wrong secret: {code}")
    stranger = client(endpoint, "NOSUCHKEYID", secret)
    code = error_of(lambda: stranger.list_objects_v2(Bucket=bucket))
    expect(code == ("InvalidAccessKeyId", 403), f"unknown access key: {code}")
    code = error_of(lambda: s3.put_object(Bucket=bucket, Key="new.txt", Body=b"x"))
    expect(code == ("AccessDenied", 403), f"put_object: {code}")
    code = error_of(lambda: s3.delete_object(Bucket=bucket, Key=n))
    expect(code == ("AccessDenied", 403), f"delete_object: {code}")

    # Presigned URLs: a fresh one reads the object, an expired one is refused.
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": n}, ExpiresIn=300)
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            expect(resp.read() == want, "presigned GET: wrong bytes")
    except urllib.error.HTTPError as e:
        raise AssertionError(f"presigned GET {url}: {e.code} {e.read().decode()}")
    expired = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": n}, ExpiresIn=1)
    time.sleep(2.2)
    try:
        urllib.request.urlopen(expired, timeout=30)
        raise AssertionError("an expired presigned URL was served")
    except urllib.error.HTTPError as e:
        body = e.read().decode()
        expect(e.code == 403 and "<Code>AccessDenied</Code>" in body, f"expired presign: {e.code} {body}")

    print(json.dumps({"objects": len(names), "pages": pages, "prefixes": len(prefixes)}))


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"s3face_boto3.py: {e}", file=sys.stderr)
        sys.exit(1)
