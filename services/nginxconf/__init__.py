"""nginx.conf for one nginx instance, shared by the launcher and the syncer: its model (config.py),
rendering (render.py), where its files are (paths.py, prefix.py), `nginx -t` (config_check.py), finding its
processes (processes.py), reloading (reload.py) and the Lua tables pushed without a reload (tables.py)."""
