#include "reporting.hpp"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "checkpoint/atomic_file.hpp"

namespace ouro::train {

namespace fs = std::filesystem;

void Progress::add(const trainer::StepResult& r, double wall_seconds) {
  loss_sum_ += r.loss_sum;
  correct_ += r.correct;
  samples_ += r.samples;
  predictions_ += double(r.predictions);
  lr_ = r.lr;
  grad_norm_ = r.grad_norm;
  step_seconds_ += r.seconds;
  comm_seconds_ += r.comm_wait_seconds;
  wall_seconds_ += wall_seconds;
  steps_++;
}

MetricsRow Progress::report(Job& job, int64_t epoch, int64_t step) {
  std::vector<double> sums = {loss_sum_, correct_, samples_, step_seconds_, comm_seconds_, predictions_};
  std::vector<double> slowest = {wall_seconds_};
  job.sum(sums);
  job.max(slowest);
  MetricsRow row;
  row.epoch = epoch;
  row.step = step;
  row.loss = sums[5] > 0 ? sums[0] / sums[5] : NAN;
  row.accuracy = sums[5] > 0 ? sums[1] / sums[5] : NAN;
  row.lr = lr_;
  row.grad_norm = grad_norm_;  // every rank's: the norm of the averaged gradient
  row.samples_per_s = slowest[0] > 0 ? sums[2] / slowest[0] : 0;
  row.comm_fraction = sums[3] > 0 ? sums[4] / sums[3] : 0;
  row.seconds = slowest[0];
  *this = Progress();
  return row;
}

std::string progressLine(const MetricsRow& row, int64_t total_steps, bool with_schedule) {
  char buf[320];
  int n = std::snprintf(buf, sizeof(buf), "epoch %lld step %lld/%lld loss %.4f accuracy %.4f samples/s %.0f comm %.1f%%",
                        static_cast<long long>(row.epoch), static_cast<long long>(row.step),
                        static_cast<long long>(total_steps), row.loss, row.accuracy, row.samples_per_s,
                        100.0 * row.comm_fraction);
  if (with_schedule && n > 0 && size_t(n) < sizeof(buf))
    std::snprintf(buf + n, sizeof(buf) - size_t(n), " lr %.2e norm %.3f", row.lr, row.grad_norm);
  return buf;
}

MetricsCsv::MetricsCsv(const std::string& path, bool with_schedule) : path_(path), with_schedule_(with_schedule) {
  file_ = std::fopen(path.c_str(), "w");
  if (!file_) throw std::runtime_error("--metrics " + path + ": cannot create it: " + std::strerror(errno));
  std::fputs(with_schedule ? "epoch,step,loss,accuracy,samples_per_s,comm_fraction,lr,grad_norm\n"
                           : "epoch,step,loss,accuracy,samples_per_s,comm_fraction\n",
             file_);
  std::fflush(file_);
}

MetricsCsv::~MetricsCsv() {
  if (file_) std::fclose(file_);
}

void MetricsCsv::append(const MetricsRow& row) {
  // %.9g keeps a float32-exact loss; the CSV is read by scripts, not people.
  int n = std::fprintf(file_, "%lld,%lld,%.9g,%.9g,%.6g,%.6g", static_cast<long long>(row.epoch),
                       static_cast<long long>(row.step), row.loss, row.accuracy, row.samples_per_s, row.comm_fraction);
  if (n >= 0 && with_schedule_) n = std::fprintf(file_, ",%.17g,%.9g", row.lr, row.grad_norm);
  if (n >= 0) n = std::fputs("\n", file_);
  if (n < 0 || std::fflush(file_) != 0)
    throw std::runtime_error("--metrics " + path_ + ": cannot write a row: " + std::strerror(errno));
}

namespace {

// Runs a shell command, returning its exit status and everything it printed (stdout and stderr).
int runCapture(const std::string& command, std::string* output) {
  std::FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot start '" + command + "': " + std::strerror(errno));
  char buf[4096];
  size_t n;
  output->clear();
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) output->append(buf, n);
  int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// A path inside gnuplot's single-quoted strings, where a quote is written twice.
std::string gnuplotQuoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// The shell's single-quoted form of text.
std::string shellQuoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string gnuplotPngTerminal() {
  std::string out;
  int rc = runCapture("gnuplot -e 'set terminal'", &out);
  if (rc == 127)
    throw std::runtime_error("--plot needs gnuplot, which is not installed (Debian: apt-get install gnuplot-nox)");
  if (rc != 0) throw std::runtime_error("--plot: 'gnuplot -e \"set terminal\"' failed (exit " + std::to_string(rc) + "): " + out);
  // The list has one terminal per line: "      pngcairo  png terminal based on cairo".
  auto has = [&](const std::string& name) {
    size_t pos = 0;
    while ((pos = out.find(name, pos)) != std::string::npos) {
      bool starts = pos == 0 || out[pos - 1] == ' ' || out[pos - 1] == '\n';
      bool ends = pos + name.size() < out.size() && out[pos + name.size()] == ' ';
      if (starts && ends) return true;
      pos += name.size();
    }
    return false;
  };
  if (has("pngcairo")) return "pngcairo";
  if (has("png")) return "png";
  throw std::runtime_error("--plot: this gnuplot has no PNG terminal (neither pngcairo nor png); install gnuplot-nox");
}

void plotMetrics(const std::vector<MetricsRow>& rows, const std::vector<std::pair<int64_t, double>>& evaluations,
                 bool eval_is_loss, const std::string& title, const std::string& terminal,
                 const std::string& png_path) {
  std::string tmpl = (fs::temp_directory_path() / "ouro-train-plot-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("--plot: cannot create a temporary folder: " + std::string(std::strerror(errno)));
  const std::string work = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{work};

  std::string train = "step,loss,accuracy\n";
  for (const MetricsRow& r : rows) {
    if (!std::isfinite(r.loss)) continue;
    char line[128];
    std::snprintf(line, sizeof(line), "%lld,%.9g,%.9g\n", static_cast<long long>(r.step), r.loss, r.accuracy);
    train += line;
  }
  std::string test = "step,value\n";
  for (const auto& [step, acc] : evaluations) {
    char line[96];
    std::snprintf(line, sizeof(line), "%lld,%.9g\n", static_cast<long long>(step), acc);
    test += line;
  }
  trainer::writeFileAtomic(work + "/train.csv", train);
  trainer::writeFileAtomic(work + "/test.csv", test);

  const std::string tmp_png = png_path + ".tmp-" + std::to_string(getpid());
  std::string script;
  script += "set terminal " + terminal + " size 1000,760\n";
  script += "set output " + gnuplotQuoted(tmp_png) + "\n";
  script += "set datafile separator ','\n";
  script += "set key autotitle columnhead\n";
  script += "set grid\n";
  script += "set multiplot layout 2,1 title " + gnuplotQuoted(title) + "\n";
  script += "set ylabel 'loss'\nset xlabel 'step'\n";
  // One progress line is one point, which a line alone does not show.
  const std::string style = rows.size() < 2 ? "linespoints pt 7" : "lines";
  script += "plot " + gnuplotQuoted(work + "/train.csv") + " using 1:2 with " + style + " lw 2 title 'training loss'";
  if (eval_is_loss && !evaluations.empty())
    script += ", " + gnuplotQuoted(work + "/test.csv") + " using 1:2 with linespoints pt 7 lw 2 title 'validation loss'";
  script += "\nset ylabel 'accuracy'\nset yrange [0:1]\nset key bottom right\n";
  script += "plot " + gnuplotQuoted(work + "/train.csv") + " using 1:3 with " + style + " lw 2 title 'training accuracy'";
  if (!eval_is_loss && !evaluations.empty())
    script += ", " + gnuplotQuoted(work + "/test.csv") + " using 1:2 with linespoints pt 7 title 'test accuracy'";
  script += "\nunset multiplot\nset output\n";
  trainer::writeFileAtomic(work + "/plot.gp", script);

  std::string out;
  int rc = runCapture("gnuplot " + shellQuoted(work + "/plot.gp"), &out);
  struct stat st{};
  if (rc != 0 || stat(tmp_png.c_str(), &st) != 0 || st.st_size == 0) {
    unlink(tmp_png.c_str());
    throw std::runtime_error("--plot " + png_path + ": gnuplot failed (exit " + std::to_string(rc) + "): " + out);
  }
  if (rename(tmp_png.c_str(), png_path.c_str()) != 0) {
    std::string reason = std::strerror(errno);
    unlink(tmp_png.c_str());
    throw std::runtime_error("--plot: cannot rename " + tmp_png + " to " + png_path + ": " + reason);
  }
}

void probeOutputFile(const std::string& flag, const std::string& path) {
  const std::string folder = trainer::parentFolder(path);
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    throw std::runtime_error(flag + " " + path + ": the folder " + folder + " does not exist");
  if (access(folder.c_str(), W_OK | X_OK) != 0)
    throw std::runtime_error(flag + " " + path + ": cannot write in the folder " + folder + ": " + std::strerror(errno));
  if (fs::is_directory(path, ec)) throw std::runtime_error(flag + " " + path + ": is a folder, expected a file name");
}

}  // namespace ouro::train
