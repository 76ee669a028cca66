"""A leader-election candidate in a process of its own, for tests that kill it.

Usage: elector_process.py API_URL IDENTITY LEASE_SECONDS. Prints "leading" when it starts leading and
"stopped" when it stops; SIGINT stops it cleanly (releasing the Lease), SIGKILL does not.
"""
import asyncio
import sys

from kubernetes import client

from services.syncer.ingress_status.leader import LeaderElector

ELECTION = "test-election"


async def main(url: str, identity: str, lease_seconds: str) -> None:
    configuration = client.Configuration()
    configuration.host = url
    elector = LeaderElector(client.ApiClient(configuration), name=ELECTION, namespace="default", identity=identity,
                            lease_duration=int(lease_seconds))

    async def lead() -> None:
        print("leading", flush=True)
        await asyncio.Event().wait()

    await elector.run(lead, lambda: print("stopped", flush=True))


if __name__ == "__main__":
    try:
        asyncio.run(main(*sys.argv[1:]))
    except KeyboardInterrupt:
        pass
