"""Ingress status: leader election with a Lease (leader.py), and while leading, the addresses written into
status.loadBalancer of every served Ingress (updater.py); campaign.py runs both inside the syncer.
"""
