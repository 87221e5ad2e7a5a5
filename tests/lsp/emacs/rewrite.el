;;; rewrite.el --- emacs --batch runs the eglot set-up of docs/editors.md against the server  -*- lexical-binding: t -*-
;; Everything comes in through environment variables (see tests/lsp/test_lsp_emacs.py); the outcome
;; goes to a JSON file.
(require 'package)
(package-initialize)
(require 'eglot)
(require 'json)

(defvar rewriter-test-messages nil)
(advice-add 'message :before
            (lambda (format &rest args)
              (when format (push (apply #'format-message format args) rewriter-test-messages))))

(defun rewriter-test-finish (status)
  (with-temp-file (getenv "REWRITER_EMACS_OUT")
    (insert (json-encode
             `((status . ,status)
               (text . ,(with-current-buffer (get-file-buffer (getenv "REWRITER_EMACS_FILE"))
                          (buffer-substring-no-properties (point-min) (point-max))))
               (messages . ,(vconcat (reverse rewriter-test-messages)))))))
  (kill-emacs 0))

;; The snippet of docs/editors.md, as a user puts it in init.el (the server command comes from the test).
(load (getenv "REWRITER_EMACS_SETUP"))

(find-file (getenv "REWRITER_EMACS_FILE"))
(python-mode)
(apply #'eglot (eglot--guess-contact))
(let ((deadline (+ (float-time) 60)))
  (while (and (not (eglot-current-server)) (< (float-time) deadline))
    (accept-process-output nil 0.1)))
(unless (eglot-current-server) (rewriter-test-finish "the server did not start"))

(goto-char (point-min))
(forward-line (string-to-number (getenv "REWRITER_EMACS_LINE")))
(rewriter-rewrite (getenv "REWRITER_EMACS_INSTRUCTION"))
;; eglot reports changes from an idle timer, and a batch Emacs is never idle: report them here,
;; every 4 s, later than the 3 s after which the server used to call our own edit a conflict.
(let ((deadline (+ (float-time) 90))
      (next-report (+ (float-time) 4)))
  (while (and (< (float-time) deadline)
              (not (seq-find (lambda (m) (string-match-p "rewriter: \\(rewrote\\|no changes\\|stopped\\|rewrite failed\\)" m))
                             rewriter-test-messages)))
    (when (> (float-time) next-report)
      (with-current-buffer (get-file-buffer (getenv "REWRITER_EMACS_FILE"))
        (eglot--signal-textDocument/didChange))
      (setq next-report (+ (float-time) 4)))
    (accept-process-output nil 0.1)))
(rewriter-test-finish "finished")
