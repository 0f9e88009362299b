// A JupyterLab 4 extension, prebuilt by hand (no bundler: it imports nothing), installed by make hub beside nbgrader's.
// nbgrader's Assignment List shows "view feedback" for fetched feedback; clicking it only runs
// filebrowser:go-to-path on the feedback folder (<step>/feedback/<timestamp>), so nothing seems to open. This plugin
// lets that command run as before and also opens each feedback page of that folder in a new browser tab.
// JupyterLab loads it as a federated module: window._JUPYTERLAB[name].init(shareScope), then .get('./extension').
(function () {
  'use strict';
  var NAME = 'course-hub-feedback';

  function baseUrl() {
    var el = document.getElementById('jupyter-config-data');
    var base = (el && JSON.parse(el.textContent || '{}').baseUrl) || '/';
    return base.endsWith('/') ? base : base + '/';
  }

  function filesUrl(path) {
    return baseUrl() + 'files/' + path.split('/').map(encodeURIComponent).join('/');
  }

  var plugin = {
    id: NAME + ':view-feedback',
    description: 'Opens the feedback page when "view feedback" is clicked in nbgrader\'s Assignment List.',
    autoStart: true,
    activate: function (app) {
      var commands = app.commands;
      var execute = commands.execute.bind(commands);
      commands.execute = function (id, args) {
        var path = (args && args.path) || '';
        if (id === 'filebrowser:go-to-path' && /(^|\/)feedback\/[^/]+\/?$/.test(path)) {
          // a window opened now, while the click still counts as the user's, is not blocked as a pop-up
          var tab = window.open('', '_blank');
          app.serviceManager.contents.get(path, { content: true }).then(function (folder) {
            var pages = folder.content.filter(function (f) { return /\.html$/.test(f.name); })
              .map(function (f) { return f.path; }).sort();
            if (!pages.length) {
              if (tab) { tab.close(); }
              return;
            }
            if (tab) { tab.location.href = filesUrl(pages[0]); } else { window.open(filesUrl(pages[0]), '_blank'); }
            pages.slice(1).forEach(function (p) { window.open(filesUrl(p), '_blank'); });
          }, function () { if (tab) { tab.close(); } });
        }
        return execute(id, args);
      };
    }
  };

  var container = {
    init: function () { return Promise.resolve(); },
    get: function (module) {
      if (module !== './extension') {
        return Promise.reject(new Error(NAME + ' has no module ' + module));
      }
      return Promise.resolve(function () { return { __esModule: true, default: [plugin] }; });
    }
  };
  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB[NAME] = container;
})();
