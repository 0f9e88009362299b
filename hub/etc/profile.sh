# /etc/profile.d/transformer-hub.sh (make hub): a terminal in a hub server is a login shell, and /etc/profile resets
# PATH; inside a server the hub started (COURSE_HUB_ENV set by hub/jupyterhub_config.py), put the course's environment
# first again, so that nbgrader and python are the course's. Anywhere else this does nothing.
if [ -n "${COURSE_HUB_ENV:-}" ] && [ -x "$COURSE_HUB_ENV/bin/python" ]; then
  case ":$PATH:" in
    *":$COURSE_HUB_ENV/bin:"*) ;;
    *) PATH="$COURSE_HUB_ENV/bin:$PATH"; export PATH ;;
  esac
fi
